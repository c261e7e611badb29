//! `swarm events [root]`: prints (and follows) the daemon's events.jsonl.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use crate::error::{exit, Error};
use crate::sys::log_reader::{printable, EventReader};
use crate::sys::watch::DirWatch;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints .swarmforge/daemon/events.jsonl, one JSON object per line, as written by \
handoffd. Only complete lines are printed; a line still being written waits for \
its newline.

Resuming: an OFFSET is a byte position in the log at the start of a line, \
counted across rotations (handoffd rotates events.jsonl by size into \
events.jsonl.<start offset>; see `logs:` in swarm.yaml), so one offset names one \
line for the life of the log. With --with-offset every line is prefixed by the \
offset just past it and a space:
  1432 {\"kind\":\"delivered\",...}
Store the prefix of the last line you processed and pass it back with \
--since 1432 to continue exactly after that line (nothing skipped, nothing \
repeated), whatever was rotated meanwhile. Without --with-offset, the offset is \
the total number of bytes of the lines read so far (each line plus its newline) \
in a log that never rotated. An offset past the end, inside a line, or in a \
rotated file retention has removed is refused (exit 1). Following reads on \
through every rotation.

--json prints JSON Lines for scripts (docs/json.md): each event object with \
`schema_version` and `offset` (the offset just past it, for --since) added, and \
an error as one JSON object.")]
pub struct Args {
    /// Project root or any folder inside it (default: the current directory)
    #[arg(id = "root_dir", value_name = "ROOT")]
    pub root: Option<PathBuf>,
    /// Keep printing new events as the daemon writes them, until interrupted
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Start at this byte offset (must be the start of a line)
    #[arg(long, value_name = "OFFSET", default_value_t = 0)]
    pub since: u64,
    /// Prefix each line with the offset just past it (pass it to --since to resume)
    #[arg(long)]
    pub with_offset: bool,
    /// JSON Lines: each event with `offset` and `schema_version` added
    #[arg(long)]
    pub json: bool,
    /// Every host's events, as this host's bridge mirrored them (docs/bridge.md):
    /// one `{"host","offset","event"}` object a line, in time order
    #[arg(long, conflicts_with_all = ["follow", "since", "with_offset"])]
    pub swarm: bool,
}

/// Where lines go: stdout, optionally prefixed by their resume offset.
struct Sink<W: Write> {
    out: W,
    with_offset: bool,
    json: bool,
}

impl<W: Write> Sink<W> {
    fn line(&mut self, line: &[u8], next: u64) -> io::Result<()> {
        if self.json {
            // A line that is not an object (a torn or foreign one) is kept,
            // as a string, rather than dropped or breaking the stream.
            let mut v = match serde_json::from_slice::<serde_json::Value>(line) {
                Ok(v @ serde_json::Value::Object(_)) => v,
                _ => serde_json::json!({ "raw": printable(line) }),
            };
            v["offset"] = next.into();
            let v = crate::cli::stamped(v);
            return writeln!(self.out, "{v}");
        }
        if self.with_offset {
            write!(self.out, "{next} ")?;
        }
        self.out.write_all(printable(line).as_bytes())?;
        self.out.write_all(b"\n")
    }
}

fn stream(args: &Args, reader: &mut EventReader, dir: PathBuf) -> io::Result<()> {
    let stdout = io::stdout();
    let mut sink = Sink {
        out: BufWriter::with_capacity(64 * 1024, stdout.lock()),
        with_offset: args.with_offset,
        json: args.json,
    };
    // Watch before the first read, so nothing appended in between is missed.
    let mut watch = args.follow.then(|| DirWatch::new(vec![dir]));
    let mut pass = |reader: &mut EventReader| -> io::Result<()> {
        if let Some(notice) = reader.poll(&mut |l, n| sink.line(l, n))? {
            eprintln!("{notice}");
        }
        sink.out.flush()
    };
    pass(reader)?;
    let Some(watch) = watch.as_mut() else {
        return Ok(());
    };
    loop {
        // Any change may be an append or a rotation; both are cheap to see.
        let _ = watch.wait();
        pass(reader)?;
    }
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(args.root.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, args.json),
    };
    if args.swarm {
        let mut text = String::new();
        for v in crate::bridge::events::all(&project) {
            let v = if args.json { crate::cli::stamped(v) } else { v };
            text.push_str(&format!("{v}\n"));
        }
        crate::cli::out(&text);
        return exit::OK;
    }
    let path = project.events_file();
    let mut reader = match EventReader::new(&path, args.since) {
        Ok(r) => r,
        Err(msg) => return crate::cli::report(&Error::env(msg), args.json),
    };
    match stream(&args, &mut reader, project.daemon_dir()) {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => crate::cli::report(&Error::io(&path, e), args.json),
    }
}
