fn main() {
    let args = std::env::args().skip(1).collect();
    std::process::exit(swarm_handoff::cli::swarm_handoff::run(args));
}
