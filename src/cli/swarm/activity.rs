//! `swarm activity [--role R] [--follow] [--json]`: what agents did between
//! handoffs, from `.swarmforge/telemetry/activity/<role>.jsonl`
//! (telemetry/activity.rs; docs/headless.md).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::exit;
use crate::telemetry::activity::{self, Activity};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this role (default: every role with an activity file)
    #[arg(long)]
    pub role: Option<String>,
    /// Keep printing new records as they are written, until interrupted
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object per record (JSON Lines) instead of text
    #[arg(long)]
    pub json: bool,
}

fn line(a: &Activity, json: bool) -> String {
    if json {
        return serde_json::to_string(a).unwrap_or_default() + "\n";
    }
    let kind = serde_json::to_value(a.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut s = format!("{} {} {kind}", a.time, a.role);
    if let Some(id) = &a.id {
        s.push_str(&format!(" [{id}]"));
    }
    if let Some(n) = &a.name {
        s.push_str(&format!(" {n}"));
    }
    if let Some(st) = &a.status {
        s.push_str(&format!(" ({st})"));
    }
    if let Some(t) = &a.text {
        s.push_str(&format!(": {t}"));
    }
    // Every field was escaped when written (its backslashes doubled once):
    // escaping again would double them twice. Only a hand-edited line that
    // holds what a terminal must not see is escaped here.
    let unsafe_char = |c: char| crate::text::is_control(c) || crate::text::is_bidi_or_separator(c);
    if s.chars().any(unsafe_char) {
        crate::text::escape(&s) + "\n"
    } else {
        s + "\n"
    }
}

pub fn run(args: Args) -> i32 {
    let project = match super::up_root(None) {
        Ok(r) => crate::protocol::layout::Project::new(r),
        Err(e) => return crate::cli::report(&e, args.json),
    };
    if let Some(r) = &args.role {
        if !crate::protocol::grammar::valid_role(r) {
            let e = crate::error::Error::bad_input(format!("'{r}' is not a role name"));
            return crate::cli::report(&e, args.json);
        }
    }
    let roles = || match &args.role {
        Some(r) => vec![r.clone()],
        None => activity::roles(&project),
    };
    let mut all = Vec::new();
    let mut skipped = 0;
    // Where each live file was read to: following goes on from there.
    let mut at: BTreeMap<String, u64> = BTreeMap::new();
    for r in roles() {
        match activity::read_to_end(&project, &r) {
            Ok((recs, s, end)) => {
                all.extend(recs);
                skipped += s;
                at.insert(r, end);
            }
            Err(e) => return crate::cli::report(&e, args.json),
        }
    }
    all.sort_by(|a, b| a.time.cmp(&b.time));
    let mut text = String::new();
    for a in &all {
        text.push_str(&line(a, args.json));
    }
    crate::cli::out(&text);
    if skipped > 0 {
        eprintln!("note: skipped {skipped} unreadable line(s)");
    }
    if !args.follow {
        return exit::OK;
    }
    // Follow each role's live file from where it was read to (not from its
    // length now: a record appended since would be skipped); a rotation
    // (the file got shorter) starts the new live file from its beginning.
    loop {
        std::thread::sleep(Duration::from_millis(200));
        for r in roles() {
            let path = project.activity_file(&r);
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            let from = at.get(&r).copied().unwrap_or(0);
            let from = if len < from { 0 } else { from };
            if len == from {
                continue;
            }
            if let Ok((recs, pos, _)) = activity::read_from(&path, from) {
                let mut text = String::new();
                for a in &recs {
                    text.push_str(&line(a, args.json));
                }
                crate::cli::out(&text);
                at.insert(r, pos);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::activity::Kind;

    #[test]
    fn text_escaped_when_written_is_printed_once_and_a_planted_escape_is_not() {
        let a = Activity::now("coder", Kind::Text).text("C:\\dir\ttab");
        let l = line(&a, false);
        assert!(l.ends_with(": C:\\\\dir\\ttab\n"), "{l}");
        let mut planted = Activity::now("coder", Kind::Text);
        planted.text = Some("\x1b[31mred".into());
        let l = line(&planted, false);
        assert!(l.contains("\\e[31mred") && !l.contains('\x1b'), "{l}");
    }
}
