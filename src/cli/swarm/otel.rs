//! `swarm otel export --since T`: sends the traces of history to the
//! collector (docs/cost.md, "Traces").

use crate::protocol::config::Config;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Each thread is one trace; each delivered copy a span (with its stages: \
queued, waiting, working) and each agent turn of the usage journal a span. \
Sent with OTLP over HTTP (protobuf) to <endpoint>/v1/traces: --endpoint, \
else `otel.endpoint` in swarm.yaml. --since takes a time, a UTC day \
(2026-12-01) or a duration back from now (2h, 7d); default: everything.
Exit 0 sent; 1 no endpoint, a bad --since, or the collector unreachable.")]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
    /// One JSON object instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Send the spans of history at or after --since
    Export {
        /// Only copies created and turns ended at or after this
        #[arg(long, value_name = "T")]
        since: Option<String>,
        /// The collector (default: otel.endpoint in swarm.yaml)
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
    },
}

pub fn run(args: Args) -> i32 {
    let Action::Export { since, endpoint } = args.action;
    super::answer(
        None,
        args.json,
        |p| {
            let since = since
                .as_deref()
                .map(|s| crate::telemetry::cost::parse_since(s, crate::protocol::clock::now()))
                .transpose()?;
            let config = Config::load(&p.config_file())?;
            let endpoint = match endpoint {
                Some(e) => {
                    let probe = format!("otel: {{endpoint: '{}'}}\n", e.replace('\'', "''"));
                    Config::parse(&probe).map_err(crate::error::Error::bad_input)?;
                    e
                }
                None => config.otel.endpoint.clone().ok_or_else(|| {
                    crate::error::Error::not_found(format!(
                        "no collector: pass --endpoint URL or set `otel: {{endpoint: URL}}` in {}",
                        p.config_file().display()
                    ))
                })?,
            };
            let n = crate::telemetry::otlp::export(p, &endpoint, since)?;
            Ok((n, crate::telemetry::otlp::traces_url(&endpoint)))
        },
        |(n, url)| serde_json::json!({"status": "exported", "spans": n, "url": url}),
        |(n, url)| format!("exported {n} spans to {url}\n"),
    )
}
