//! `swarm can-send` (in progress).

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Arguments (not yet implemented)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

pub fn run(_args: Args) -> i32 {
    eprintln!("swarm can-send: not implemented yet");
    crate::error::exit::ENV
}
