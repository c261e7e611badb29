fn main() {
    std::process::exit(swarm_handoff::cli::swarm::run());
}
