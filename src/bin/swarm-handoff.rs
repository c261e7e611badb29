fn main() {
    std::process::exit(swarm_handoff::cli::swarm_handoff::run());
}
