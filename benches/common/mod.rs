//! Pieces every benchmark shares: the bare durable-publish loop (the physical
//! limit every figure is compared with), the binaries under test, and the
//! `--name value` flags.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The physical limit: write + (fsync) + rename + (fsync of the folder) of
/// `n` files of `body` bytes in a fresh folder under `base`; time per file.
pub fn bare_loop(base: &Path, n: usize, sync: bool, body: usize) -> Duration {
    let d = tempfile::tempdir_in(base).unwrap();
    let dir = fs::File::open(d.path()).unwrap();
    let body = vec![b'x'; body];
    let t = Instant::now();
    for i in 0..n {
        let tmp = d.path().join(format!(".{i}.tmp"));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .unwrap();
        f.write_all(&body).unwrap();
        if sync {
            f.sync_all().unwrap();
        }
        fs::rename(&tmp, d.path().join(format!("{i}.msg"))).unwrap();
        if sync {
            dir.sync_all().unwrap();
        }
    }
    t.elapsed() / n.max(1) as u32
}

/// A binary of this package, as built for the benchmark.
pub fn bin(name: &str) -> PathBuf {
    match name {
        "swarm-handoff" => env!("CARGO_BIN_EXE_swarm-handoff").into(),
        "ready-next" => env!("CARGO_BIN_EXE_ready-next").into(),
        "done-current" => env!("CARGO_BIN_EXE_done-current").into(),
        "handoffd" => env!("CARGO_BIN_EXE_handoffd").into(),
        "swarm" => env!("CARGO_BIN_EXE_swarm").into(),
        other => panic!("unknown binary {other}"),
    }
}

/// `--name value` pairs from the command line (`cargo bench` adds a lone
/// `--bench`, which is skipped).
pub fn flags() -> HashMap<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        match (args[i].strip_prefix("--"), args.get(i + 1)) {
            (Some(name), Some(v)) if !v.starts_with("--") => {
                out.insert(name.to_string(), v.clone());
                i += 2;
            }
            _ => i += 1,
        }
    }
    out
}

/// The flag's value parsed, or `default`; a bad value stops the run.
pub fn flag<T: std::str::FromStr>(f: &HashMap<String, String>, name: &str, default: T) -> T {
    match f.get(name) {
        Some(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("--{name}: cannot parse '{v}'")),
        None => default,
    }
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
