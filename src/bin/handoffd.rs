fn main() {
    std::process::exit(swarm_handoff::cli::handoffd::run());
}
