//! A git loose object judged by its content. A loose object's file name is
//! its id, and git never hashes it again when it reads it: it trusts its
//! object folder. An object a confined agent wrote joins the project's store
//! only once [`LooseCheck`] has hashed the very bytes that will be published
//! (daemon/objects/), so a reviewed commit id always names the content
//! that was reviewed.
//!
//! The invariant: [`LooseCheck::verdict`] is Ok only when the bytes fed were
//! one complete zlib stream of `<type> <size>\0<content>`, nothing after
//! it, of a known type, with `size` the content's length (at most
//! [`MAX_OBJECT`]), and the hash of it all (SHA-1 with git's collision
//! detection, or SHA-256 in a SHA-256 repository) is the name given.

/// The largest object taken in (git's own `core.bigFileThreshold` default is
/// half this): a few compressed bytes can claim gigabytes, and each byte is
/// hashed.
pub const MAX_OBJECT: u64 = 1 << 30;

/// How long a header may be: `commit 1073741824` and its NUL fit.
const MAX_HEADER: usize = 32;

/// A repository's object format (`git rev-parse --show-object-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Sha1,
    Sha256,
}

impl Format {
    /// git's name for it, as `rev-parse --show-object-format` prints it.
    pub fn parse(s: &str) -> Option<Format> {
        match s.trim() {
            "sha1" => Some(Format::Sha1),
            "sha256" => Some(Format::Sha256),
            _ => None,
        }
    }

    /// The length of an object id in hex.
    pub fn hex_len(self) -> usize {
        match self {
            Format::Sha1 => 40,
            Format::Sha256 => 64,
        }
    }

    /// Whether `id` could be an object id of this format (lower-case hex of
    /// the right length).
    pub fn is_id(self, id: &str) -> bool {
        id.len() == self.hex_len() && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

/// Why fed bytes are not the object they are named for, in words for a
/// person ("it is cut short: ...").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotTheObject(pub String);

impl From<&str> for NotTheObject {
    fn from(why: &str) -> NotTheObject {
        NotTheObject(why.to_string())
    }
}

enum Hasher {
    Sha1(Box<sha1_checked::Sha1>),
    Sha256(sha2::Sha256),
}

/// Compressed bytes in, a verdict out: feed it everything read from the
/// object's file ([`LooseCheck::feed`]), then ask [`LooseCheck::verdict`].
pub struct LooseCheck {
    zlib: flate2::Decompress,
    ended: bool,
    hasher: Hasher,
    header: Vec<u8>,
    declared: Option<u64>,
    seen: u64,
    fault: Option<String>,
    out: Vec<u8>,
}

impl LooseCheck {
    pub fn new(format: Format) -> LooseCheck {
        LooseCheck {
            zlib: flate2::Decompress::new(true),
            ended: false,
            hasher: match format {
                Format::Sha1 => Hasher::Sha1(Box::default()),
                Format::Sha256 => Hasher::Sha256(<sha2::Sha256 as sha2::Digest>::new()),
            },
            header: Vec::new(),
            declared: None,
            seen: 0,
            fault: None,
            out: vec![0; 64 * 1024],
        }
    }

    /// The next compressed bytes of the file.
    pub fn feed(&mut self, mut input: &[u8]) {
        while !input.is_empty() && self.fault.is_none() {
            if self.ended {
                self.fault = Some("it has bytes after the end of its compressed stream".into());
                return;
            }
            let (was_in, was_out) = (self.zlib.total_in(), self.zlib.total_out());
            let status = self
                .zlib
                .decompress(input, &mut self.out, flate2::FlushDecompress::None);
            let used = (self.zlib.total_in() - was_in) as usize;
            let made = (self.zlib.total_out() - was_out) as usize;
            match status {
                Ok(flate2::Status::StreamEnd) => self.ended = true,
                Ok(_) if used == 0 && made == 0 => {
                    self.fault = Some("it is not a zlib stream git could read".into());
                }
                Ok(_) => {}
                Err(e) => {
                    self.fault = Some(format!("it is not a zlib stream git could read ({e})"))
                }
            }
            let out = std::mem::take(&mut self.out);
            self.inflated(&out[..made]);
            self.out = out;
            input = &input[used.min(input.len())..];
        }
    }

    /// Inflated bytes: the header first, then the content.
    fn inflated(&mut self, mut bytes: &[u8]) {
        if self.declared.is_none() {
            let room = MAX_HEADER.saturating_sub(self.header.len());
            match bytes.iter().take(room).position(|&b| b == 0) {
                Some(nul) => {
                    self.header.extend_from_slice(&bytes[..=nul]);
                    bytes = &bytes[nul + 1..];
                    match parse_header(&self.header) {
                        Ok(size) => {
                            self.declared = Some(size);
                            let h = std::mem::take(&mut self.header);
                            self.hash(&h);
                            self.header = h;
                        }
                        Err(why) => {
                            self.fault = Some(why.0);
                            return;
                        }
                    }
                }
                None if bytes.len() < room => {
                    self.header.extend_from_slice(bytes);
                    return;
                }
                None => {
                    self.fault = Some("its header (`<type> <size>`) is missing or too long".into());
                    return;
                }
            }
        }
        self.seen += bytes.len() as u64;
        if self.declared.is_some_and(|d| self.seen > d) {
            self.fault = Some("its content is longer than its header says".into());
            return;
        }
        self.hash(bytes);
    }

    fn hash(&mut self, bytes: &[u8]) {
        match &mut self.hasher {
            Hasher::Sha1(h) => sha1_checked::Digest::update(h.as_mut(), bytes),
            Hasher::Sha256(h) => sha2::Digest::update(h, bytes),
        }
    }

    /// Ok when everything fed was the object named `id`; else why not, in
    /// words for a person.
    pub fn verdict(self, id: &str) -> Result<(), NotTheObject> {
        if let Some(f) = self.fault {
            return Err(NotTheObject(f));
        }
        let Some(declared) = self.declared else {
            return Err("it ends before its header (`<type> <size>`) does".into());
        };
        if !self.ended || self.seen != declared {
            return Err(NotTheObject(format!(
                "it is cut short: its header says {declared} bytes, its stream holds {}",
                self.seen
            )));
        }
        let hex = match self.hasher {
            Hasher::Sha1(h) => {
                let r = h.try_finalize();
                if r.has_collision() {
                    return Err("its content is part of a SHA-1 collision attack".into());
                }
                hex(r.hash())
            }
            Hasher::Sha256(h) => hex(&sha2::Digest::finalize(h)),
        };
        if hex != id {
            return Err(NotTheObject(format!(
                "its content is the object {hex}, not {id}"
            )));
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The size a header `<type> <size>\0` declares.
fn parse_header(h: &[u8]) -> Result<u64, NotTheObject> {
    let text = std::str::from_utf8(&h[..h.len() - 1]).unwrap_or("");
    let bad = || {
        NotTheObject(format!(
            "its header `{}` is not `<type> <size>`",
            crate::text::escape(text)
        ))
    };
    let (kind, size) = text.split_once(' ').ok_or_else(bad)?;
    if !matches!(kind, "blob" | "tree" | "commit" | "tag") {
        return Err(NotTheObject(format!(
            "its type `{}` is none of git's",
            crate::text::escape(kind)
        )));
    }
    let canonical = !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && (size == "0" || !size.starts_with('0'));
    let n: u64 = size.parse().ok().filter(|_| canonical).ok_or_else(bad)?;
    if n > MAX_OBJECT {
        return Err(NotTheObject(format!(
            "it declares {n} bytes, more than the {MAX_OBJECT} an object may have here"
        )));
    }
    Ok(n)
}

/// [`LooseCheck`] fed by a reader as it is read (`fsx::stage` copies
/// through it, so what is judged is what is published).
pub struct Judged<'a, R> {
    pub from: R,
    pub check: &'a mut LooseCheck,
}

impl<R: std::io::Read> std::io::Read for Judged<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.from.read(buf)?;
        self.check.feed(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn loose(kind: &str, content: &[u8]) -> Vec<u8> {
        let mut raw = format!("{kind} {}\0", content.len()).into_bytes();
        raw.extend_from_slice(content);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw).unwrap();
        z.finish().unwrap()
    }

    fn judge(format: Format, file: &[u8], id: &str) -> Result<(), NotTheObject> {
        let mut c = LooseCheck::new(format);
        for chunk in file.chunks(7) {
            c.feed(chunk);
        }
        c.verdict(id)
    }

    // `printf 'hello\n' | git hash-object --stdin` (and with
    // `--object-format=sha256` in a sha256 repository).
    const HELLO: &str = "ce013625030ba8dba906f756967f9e9ca394464a";
    const HELLO256: &str = "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4";

    #[test]
    fn an_object_is_taken_only_under_the_name_of_its_content() {
        let file = loose("blob", b"hello\n");
        assert_eq!(judge(Format::Sha1, &file, HELLO), Ok(()));
        assert_eq!(judge(Format::Sha256, &file, HELLO256), Ok(()));
        let forged = loose("blob", b"rm -rf ~\n");
        let e = judge(Format::Sha1, &forged, HELLO).unwrap_err();
        assert!(e.0.contains("not ce013625"), "{e}");
    }

    #[test]
    fn a_broken_object_is_refused_with_its_fault() {
        let file = loose("blob", b"hello\n");
        let cut = &file[..file.len() - 3];
        assert!(judge(Format::Sha1, cut, HELLO)
            .unwrap_err()
            .0
            .contains("cut short"));
        let mut tail = file.clone();
        tail.extend_from_slice(b"more");
        assert!(judge(Format::Sha1, &tail, HELLO)
            .unwrap_err()
            .0
            .contains("after the end"));
        assert!(judge(Format::Sha1, b"plain text", HELLO)
            .unwrap_err()
            .0
            .contains("zlib"));
        let e = judge(Format::Sha1, &loose("blub", b"hello\n"), HELLO).unwrap_err();
        assert!(e.0.contains("type `blub`"), "{e}");
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"blob 3\0hello\n").unwrap();
        let long = z.finish().unwrap();
        assert!(judge(Format::Sha1, &long, HELLO)
            .unwrap_err()
            .0
            .contains("longer"));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"blob 99999999999\0").unwrap();
        let huge = z.finish().unwrap();
        assert!(judge(Format::Sha1, &huge, HELLO)
            .unwrap_err()
            .0
            .contains("more than"));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&[b'x'; 100]).unwrap();
        let headless = z.finish().unwrap();
        assert!(judge(Format::Sha1, &headless, HELLO)
            .unwrap_err()
            .0
            .contains("header"));
    }
}
