//! `swarm status [root] [--json]`.

use crate::views::status;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub root: super::RootArg,
    /// One JSON object instead of the table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    super::answer(
        args.root.path(),
        args.json,
        status::collect,
        |s| serde_json::to_value(s).unwrap_or_default(),
        status::text,
    )
}
