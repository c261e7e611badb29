//! `swarm cost [--by role|item|thread|day] [--since T] [--json]`: tokens and
//! cost from the usage journal (docs/cost.md).

use crate::telemetry::cost::{self, By};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Sums .swarmforge/telemetry/usage.jsonl, one line per agent turn. A turn's cost \
is its CLI's own figure when it reported one, else its tokens priced by \
`prices:` in swarm.yaml (US dollars per million tokens, per model); a turn \
with neither is counted as unpriced. Unreadable journal lines are skipped and \
counted. --since takes a time (2026-12-01T08:00:00Z), a UTC day (2026-12-01) \
or a duration back from now (2h, 7d).
Exit 0; 1 on a bad --since or an unreadable swarm.yaml.")]
pub struct Args {
    #[command(flatten)]
    pub root: super::RootArg,
    /// Group the rows by this
    #[arg(long, value_enum, default_value_t = By::Role)]
    pub by: By,
    /// Only turns that ended at or after this
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// One JSON object instead of the table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> i32 {
    super::answer(
        args.root.path(),
        args.json,
        |p| {
            let since = args
                .since
                .as_deref()
                .map(|s| cost::parse_since(s, crate::protocol::clock::now()))
                .transpose()?;
            cost::report(p, args.by, since)
        },
        |r| crate::cli::stamped(serde_json::to_value(r).unwrap_or_default()),
        cost::text,
    )
}
