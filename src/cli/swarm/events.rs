//! `swarm events [root]`: prints (and follows) the daemon's events.jsonl.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use crate::error::{exit, Error};
use crate::protocol::trail::watch::DirWatch;
use crate::views::events::{printable, EventReader};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints .swarmforge/daemon/events.jsonl, one JSON object per line, as written by \
handoffd. Only complete lines are printed; a line still being written waits for \
its newline.

Resuming: an OFFSET is a byte position in the file at the start of a line. With \
--with-offset every line is prefixed by the offset just past it and a space:
  1432 {\"kind\":\"delivered\",...}
Store the prefix of the last line you processed and pass it back with \
--since 1432 to continue exactly after that line (nothing skipped, nothing \
repeated). Without --with-offset, the offset is the total number of bytes of the \
lines read so far (each line plus its newline). An offset past the end of the \
file or inside a line is refused (exit 1). When following, a rotated or truncated \
file is noted on stderr and read again from offset 0.")]
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
}

/// Where lines go: stdout, optionally prefixed by their resume offset.
struct Sink<W: Write> {
    out: W,
    with_offset: bool,
}

impl<W: Write> Sink<W> {
    fn line(&mut self, line: &[u8], next: u64) -> io::Result<()> {
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
    };
    // Watch before the first read, so nothing appended in between is missed.
    let mut watch = args.follow.then(|| DirWatch::new(vec![dir]));
    reader.poll(&mut |l, n| sink.line(l, n))?;
    sink.out.flush()?;
    let Some(watch) = watch.as_mut() else {
        return Ok(());
    };
    loop {
        // Any change may be an append; the file is cheap to look at.
        let _ = watch.wait();
        if let Some(notice) = reader.reopen_if_replaced(&mut |l, n| sink.line(l, n))? {
            eprintln!("{notice}");
        }
        reader.poll(&mut |l, n| sink.line(l, n))?;
        sink.out.flush()?;
    }
}

pub fn run(args: Args) -> i32 {
    let project = match super::project(args.root.as_deref()) {
        Ok(p) => p,
        Err(e) => return crate::cli::report(&e, false),
    };
    let path = project.events_file();
    let mut reader = match EventReader::new(&path, args.since) {
        Ok(r) => r,
        Err(msg) => return crate::cli::report(&Error::env(msg), false),
    };
    match stream(&args, &mut reader, project.daemon_dir()) {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            eprintln!(
                "swarm events: {}: {e}",
                crate::text::escape(&path.display().to_string())
            );
            exit::ENV
        }
    }
}
