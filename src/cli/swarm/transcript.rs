//! `swarm transcript [root]`: every message of the project once, in order.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use crate::board;
use crate::cli;
use crate::error::{exit, Error, Result};
use crate::forum::session::{self, Session};
use crate::protocol::trail::{Original, Scope, Trail};
use crate::protocol::{clock, idprefix};
use crate::text;
use crate::views::transcript::{self, follow, Filter, Format, Printer};
use crate::views::vouched;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Each message once: the sender's copy in sent/ or failed/ (de-duplicated by id) \
and anything still in an outbox, ordered by created_at, then id. Times are UTC.

Text lines:  [HH:MM:SS] [FROM -> TO] <type> <task, message, subject or first body line>
(with --ids: [HH:MM:SS] <id> [FROM -> TO] ...; any command that takes an id takes a unique prefix of it)
with a `--- YYYY-MM-DD ---` line whenever the day changes and ` [failed: <reason>]` \
after a failed message. Control characters are escaped, so one message is one line.
--json (or --format jsonl, the older spelling) prints JSON Lines: one object per \
message (id, time, created_at, from, to, type, task, state, reason, path, headers, \
body; docs/json.md), and an error as one JSON object;
--format md prints a Markdown report with one section per message and its full file.
--session S prints only the messages stamped with forum session S, framed by `=== session S started <time> by <who>: <title> ===` and `=== session S closed <time>: <reason> ===` (or `=== session S open ===`); jsonl frames them with {\"marker\": ...} objects.
--thread ID prints one conversation (the thread of that message) as a tree: each reply after its parent, indented two spaces per level (jsonl adds a `depth`).")]
pub struct Args {
    /// Project root or any folder inside it (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Only messages sent or received by this role
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,
    /// Only messages of this type (git_handoff, note, post, ...)
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: Option<String>,
    /// Only messages with this task header
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// From this time on (RFC 3339, or an age such as 90s, 2h, 1d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Before this time (RFC 3339, or an age such as 90s, 2h, 1d)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only the last N messages (after the other filters)
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Only the conversation this message belongs to, replies indented under
    /// their parent (the id of any message in it)
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Only the messages of this forum session, framed by its start and end
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Output format (`jsonl` is what --json prints)
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// JSON Lines: one object per message (same as --format jsonl)
    #[arg(long)]
    pub json: bool,
    /// Keep printing new messages as they are sent, until interrupted
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Text lines show each message's id after the time (the id `receipts`,
    /// `--thread`, `answer` and `inbox` take; any unique prefix of it works)
    #[arg(long)]
    pub ids: bool,
}

fn filter(args: &Args) -> Result<Filter, Error> {
    let now = clock::now();
    let time = |s: &Option<String>| {
        s.as_deref()
            .map(|s| transcript::parse_time(s, now))
            .transpose()
    };
    Ok(Filter {
        role: args.role.clone(),
        kind: args.kind.clone(),
        task: args.task.clone(),
        since: time(&args.since)?,
        until: time(&args.until)?,
        thread: None,
        session: args.session.clone(),
    })
}

/// A closed pipe (`swarm transcript | head`) is a normal end.
fn finish(r: io::Result<()>) -> i32 {
    match r {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            eprintln!("swarm transcript: cannot write output: {e}");
            exit::ENV
        }
    }
}

pub fn run(mut args: Args) -> i32 {
    if args.json {
        args.format = Format::Jsonl;
    }
    let json = args.format == Format::Jsonl;
    let loaded = filter(&args).and_then(|f| {
        let project = super::project(args.root.as_deref())?;
        Ok((f, Trail::load(&project, &Scope::originals())?))
    });
    let (mut filter, t) = match loaded {
        Ok(x) => x,
        Err(e) => return cli::report(&e, json),
    };
    let session = match args
        .session
        .as_deref()
        .map(|s| session::find(&t.project, s))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return cli::report(&e, json),
    };
    if !t.bad.is_empty() || !t.unreadable.is_empty() {
        eprintln!(
            "warning: skipped {} unreadable or malformed file(s) and {} unreadable folder(s); `swarm audit --check` lists them",
            t.bad.len(),
            t.unreadable.len()
        );
    }
    let all = transcript::messages(&t.originals);
    let mut printer = Printer::new(args.format, &t.roles);
    printer.ids = args.ids;
    // With --thread: the whole conversation as a tree, then the other filters.
    let ordered: Vec<&Original> = match &args.thread {
        None => all.clone(),
        Some(typed) => match thread(&t, &all, typed) {
            Ok((root, tree)) => {
                filter.thread = Some(root.clone());
                printer = printer.threaded(&root);
                for (o, depth) in &tree {
                    printer.set_depth(o.id(), *depth);
                }
                tree.into_iter().map(|(o, _)| o).collect()
            }
            Err(e) => return cli::report(&e, json),
        },
    };
    // Reactions are shown beside the message they answer.
    printer.reactions = transcript::reaction_marks(&all);
    let mut shown: Vec<_> = ordered
        .into_iter()
        .filter(|o| filter.matches(&o.msg, &t.roles))
        .filter(|o| !transcript::is_folded(o, &printer.reactions))
        .collect();
    if let Some(n) = args.last {
        let skip = shown.len().saturating_sub(n);
        shown.drain(..skip);
    }
    // What the journal does not vouch for is not shown as said.
    printer.doubts = vouched::doubts(&t, shown.iter().copied());
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let r = write_all(
        &args,
        &t,
        session.as_ref(),
        &shown,
        &filter,
        &mut printer,
        &mut out,
    );
    finish(r)
}

/// `--thread`: the root of the conversation the message `typed` names (an
/// id or its prefix), and its members in tree order with their depths.
fn thread<'t>(
    t: &Trail,
    all: &[&'t Original],
    typed: &str,
) -> Result<(String, Vec<(&'t Original, usize)>)> {
    let id = match idprefix::resolve(typed, all.iter().map(|o| o.id())) {
        idprefix::Match::One(id) => id,
        idprefix::Match::Many(ids) => return Err(idprefix::ambiguous(typed, &ids)),
        idprefix::Match::None => typed.to_string(),
    };
    let id = &id;
    let root = transcript::thread_root(all, id).to_string();
    let members: Vec<_> = all
        .iter()
        .copied()
        .filter(|o| o.id() == root || o.msg.thread() == Some(root.as_str()))
        .collect();
    if members.is_empty() {
        return Err(Error::not_found(format!(
            "No message with id {} in {}.",
            text::escape(id),
            t.project.root.display()
        )));
    }
    let tree = transcript::thread_order(&members, &root);
    Ok((root, tree))
}

/// The transcript: its preamble, the session's edges, each message shown,
/// the board (text only), then what follows when `--follow`.
fn write_all(
    args: &Args,
    t: &Trail,
    session: Option<&Session>,
    shown: &[&Original],
    filter: &Filter,
    printer: &mut Printer,
    out: &mut impl Write,
) -> io::Result<()> {
    out.write_all(printer.preamble(&t.project.root).as_bytes())?;
    if let Some(s) = session {
        let m = transcript::session_marker(args.format, s, transcript::Edge::Start);
        out.write_all(m.as_bytes())?;
    }
    for o in shown {
        out.write_all(printer.entry(o).as_bytes())?;
    }
    if let Some(s) = session.filter(|_| !args.follow) {
        let m = transcript::session_marker(args.format, s, transcript::Edge::End);
        out.write_all(m.as_bytes())?;
    }
    // Where the cards stand (crates/swarm-records/src/board/); the JSON lines stay messages only.
    if args.format != Format::Jsonl && !args.follow {
        if let Ok(Some(b)) = board::view_of(&t.project, t) {
            out.write_all(board::text(&b).as_bytes())?;
        }
    }
    out.flush()?;
    if args.follow {
        let seen = follow::Seen::from_trail(t);
        follow::run(t, seen, filter, printer, out)?;
    }
    Ok(())
}
