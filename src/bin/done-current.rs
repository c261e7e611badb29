fn main() {
    std::process::exit(swarm_handoff::cli::done_current::run());
}
