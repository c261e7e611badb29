fn main() {
    std::process::exit(swarm_handoff::cli::ready_next::run());
}
