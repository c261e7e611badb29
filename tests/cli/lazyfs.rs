//! A file system that can lose power (docs/power-loss.md), in the spirit of
//! LazyFS: a FUSE pass-through over a backing folder that records, in order,
//! every change to the tree (create, mkdir, rename, link, unlink, truncate)
//! and every `fsync`/`fdatasync` of a file or folder, with the file's bytes
//! as they were synced.
//!
//! From that record [`Journal::materialize`] builds what a disk could hold
//! after a power cut right after any sync (and, optionally, a few tree
//! changes later), in the worst case the ext4 ordered-mode model allows with
//! delayed allocation: tree changes are journaled in order, each sync
//! commits every change before it; file data is durable only when the file
//! itself was synced, or when the kernel's flusher wrote it back
//! ([`Mount::writeback`], which the harness calls as the flusher's timer
//! would), so data written since then is gone (an appended tail lost, a
//! truncated-and-rewritten file left short or empty). Without writeback a
//! file never synced would always come back empty, and the state a real
//! disk reaches most often (a log whose head was written back, its tail
//! lost) could never be checked.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{self, File, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};

/// One recorded step, in the order the file system saw it. Paths are
/// relative to the mount's root.
#[derive(Clone, Debug)]
pub enum Op {
    Mkdir(PathBuf),
    /// A new file, and its inode (which the data steps name).
    Create(PathBuf, u64),
    Rename(PathBuf, PathBuf),
    Link(PathBuf, PathBuf),
    Symlink(PathBuf, PathBuf),
    Unlink(PathBuf),
    Rmdir(PathBuf),
    /// A file's size set (a journaled change, unlike its data).
    Truncate(u64, u64),
    /// fsync/fdatasync of a file: its bytes at that moment.
    SyncFile(u64, Vec<u8>),
    /// fsync of a folder.
    SyncDir,
    /// The flusher wrote a file's data back: its bytes at that moment
    /// (durable like a sync's, but no crash point of its own and no
    /// commit of the tree changes before it beyond the cut's order).
    Writeback(u64, Vec<u8>),
}

impl Op {
    pub fn is_sync(&self) -> bool {
        matches!(self, Op::SyncFile(..) | Op::SyncDir)
    }
}

/// What a power cut can leave: the tree when recording began (all of it
/// durable) and every step since.
#[derive(Default)]
pub struct Journal {
    base: Vec<(PathBuf, Entry)>,
    pub ops: Vec<Op>,
}

#[derive(Clone)]
enum Entry {
    Dir,
    File(u64, Vec<u8>),
    Symlink(PathBuf),
}

impl Journal {
    /// How many syncs have completed: a crash point is a number up to this.
    pub fn syncs(&self) -> usize {
        self.ops.iter().filter(|o| o.is_sync()).count()
    }

    /// The index in `ops` just after the `k`-th sync (0: before any).
    fn after_sync(&self, k: usize) -> usize {
        if k == 0 {
            return 0;
        }
        let mut seen = 0;
        for (i, o) in self.ops.iter().enumerate() {
            if o.is_sync() {
                seen += 1;
                if seen == k {
                    return i + 1;
                }
            }
        }
        self.ops.len()
    }

    /// The tree changes after the `k`-th sync and before the next one: how
    /// far a crash point's journal may run on.
    pub fn slack(&self, k: usize) -> usize {
        self.ops[self.after_sync(k)..]
            .iter()
            .take_while(|o| !o.is_sync())
            .count()
    }

    /// Writes into the empty folder `to` what survives a power cut after
    /// the `k`-th sync plus `extra` of the tree changes that followed it.
    pub fn materialize(&self, k: usize, extra: usize, to: &Path) {
        let cut = self.after_sync(k) + extra.min(self.slack(k));
        let mut ino_of: HashMap<PathBuf, u64> = HashMap::new();
        let mut data: HashMap<u64, Vec<u8>> = HashMap::new();
        for (rel, e) in &self.base {
            let p = to.join(rel);
            match e {
                Entry::Dir => fs::create_dir_all(&p).unwrap(),
                Entry::File(ino, bytes) => {
                    fs::File::create(&p).unwrap();
                    ino_of.insert(rel.clone(), *ino);
                    data.insert(*ino, bytes.clone());
                }
                Entry::Symlink(t) => std::os::unix::fs::symlink(t, &p).unwrap(),
            }
        }
        for op in &self.ops[..cut] {
            match op {
                Op::Mkdir(p) => fs::create_dir(to.join(p)).unwrap(),
                Op::Create(p, ino) => {
                    fs::File::create(to.join(p)).unwrap();
                    ino_of.insert(p.clone(), *ino);
                    data.insert(*ino, Vec::new());
                }
                Op::Rename(a, b) => {
                    fs::rename(to.join(a), to.join(b)).unwrap();
                    let moved: Vec<(PathBuf, u64)> = ino_of
                        .iter()
                        .filter(|(p, _)| p.starts_with(a))
                        .map(|(p, i)| (p.clone(), *i))
                        .collect();
                    ino_of.retain(|p, _| !p.starts_with(b));
                    for (p, i) in moved {
                        ino_of.remove(&p);
                        ino_of.insert(moved_to(&p, a, b).unwrap(), i);
                    }
                }
                Op::Link(a, b) => {
                    fs::hard_link(to.join(a), to.join(b)).unwrap();
                    if let Some(i) = ino_of.get(a).copied() {
                        ino_of.insert(b.clone(), i);
                    }
                }
                Op::Symlink(p, t) => std::os::unix::fs::symlink(t, to.join(p)).unwrap(),
                Op::Unlink(p) => {
                    fs::remove_file(to.join(p)).unwrap();
                    ino_of.remove(p);
                }
                Op::Rmdir(p) => fs::remove_dir(to.join(p)).unwrap(),
                Op::Truncate(ino, size) => {
                    if let Some(d) = data.get_mut(ino) {
                        d.truncate(*size as usize);
                    }
                }
                Op::SyncFile(ino, bytes) | Op::Writeback(ino, bytes) => {
                    data.insert(*ino, bytes.clone());
                }
                Op::SyncDir => {}
            }
        }
        for (rel, ino) in &ino_of {
            let bytes = data.get(ino).map_or(&[][..], |d| d);
            if let Err(e) = fs::write(to.join(rel), bytes) {
                panic!(
                    "crash point {k}+{extra}: {}: {e}\nlast steps: {:#?}",
                    rel.display(),
                    &self.ops[cut.saturating_sub(20)..cut]
                );
            }
        }
    }
}

/// Where `p` is once `a` is renamed to `b` (None: not under `a`).
fn moved_to(p: &Path, a: &Path, b: &Path) -> Option<PathBuf> {
    let rest = p.strip_prefix(a).ok()?;
    Some(if rest.as_os_str().is_empty() {
        b.to_path_buf()
    } else {
        b.join(rest)
    })
}

/// The mounted file system's state: which backing path each inode is at,
/// open files, and the journal the harness reads.
pub struct LazyFs {
    backing: PathBuf,
    root_ino: u64,
    inner: Mutex<Inner>,
    pub journal: Arc<Mutex<Journal>>,
}

struct Inner {
    paths: HashMap<u64, PathBuf>,
    files: HashMap<u64, File>,
    next_fh: u64,
}

const TTL: Duration = Duration::ZERO;

fn err(e: std::io::Error) -> Errno {
    Errno::from(e)
}

fn kind(m: &Metadata) -> FileType {
    FileType::from_std(m.file_type()).unwrap_or(FileType::RegularFile)
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

impl LazyFs {
    /// Over `backing`, whose present tree is the durable start.
    pub fn new(backing: &Path) -> LazyFs {
        let root_ino = fs::metadata(backing).unwrap().ino();
        let fs = LazyFs {
            backing: backing.to_path_buf(),
            root_ino,
            inner: Mutex::new(Inner {
                paths: HashMap::from([(1, PathBuf::new())]),
                files: HashMap::new(),
                next_fh: 1,
            }),
            journal: Arc::new(Mutex::new(Journal::default())),
        };
        fs.checkpoint();
        fs
    }

    /// Everything on the backing folder now counts as durable (as after
    /// `sync`); the journal starts over.
    fn checkpoint(&self) {
        let mut base = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let mut names: Vec<_> = fs::read_dir(self.backing.join(&rel))
                .unwrap()
                .flatten()
                .collect();
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let r = rel.join(e.file_name());
                let m = e.path().symlink_metadata().unwrap();
                if m.is_dir() {
                    base.push((r.clone(), Entry::Dir));
                    stack.push(r);
                } else if m.file_type().is_symlink() {
                    base.push((r, Entry::Symlink(fs::read_link(e.path()).unwrap())));
                } else {
                    base.push((r, Entry::File(m.ino(), fs::read(e.path()).unwrap())));
                }
            }
        }
        // Parents before children.
        base.sort_by(|a, b| a.0.cmp(&b.0));
        let mut j = self.journal.lock().unwrap();
        j.base = base;
        j.ops.clear();
    }

    fn record(&self, op: Op) {
        self.journal.lock().unwrap().ops.push(op);
    }

    fn fuse_ino(&self, ino: u64) -> u64 {
        if ino == self.root_ino {
            1
        } else {
            ino
        }
    }

    fn attr(&self, m: &Metadata) -> FileAttr {
        let t = |s: i64, n: i64| UNIX_EPOCH + Duration::new(s.max(0) as u64, n as u32);
        FileAttr {
            ino: INodeNo(self.fuse_ino(m.ino())),
            size: m.len(),
            blocks: m.blocks(),
            atime: t(m.atime(), m.atime_nsec()),
            mtime: t(m.mtime(), m.mtime_nsec()),
            ctime: t(m.ctime(), m.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: kind(m),
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: m.rdev() as u32,
            blksize: 4096,
            flags: 0,
        }
    }

    fn rel(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.inner
            .lock()
            .unwrap()
            .paths
            .get(&ino.0)
            .cloned()
            .ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.rel(parent)?.join(name))
    }

    /// Looks `rel` up on the backing folder and remembers its inode.
    fn entry(&self, rel: &Path) -> Result<FileAttr, Errno> {
        let m = self.backing.join(rel).symlink_metadata().map_err(err)?;
        let a = self.attr(&m);
        self.inner
            .lock()
            .unwrap()
            .paths
            .insert(a.ino.0, rel.to_path_buf());
        Ok(a)
    }

    fn open_fh(&self, f: File) -> u64 {
        let mut i = self.inner.lock().unwrap();
        let fh = i.next_fh;
        i.next_fh += 1;
        i.files.insert(fh, f);
        fh
    }

    fn options(flags: i32) -> fs::OpenOptions {
        let mut o = fs::OpenOptions::new();
        let acc = flags & libc::O_ACCMODE;
        // Always readable: fsync reads the bytes it makes durable.
        o.read(true)
            .write(acc != libc::O_RDONLY)
            .custom_flags(flags & libc::O_APPEND);
        o
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name).and_then(|r| self.entry(&r)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let by_fh = fh.and_then(|h| {
            let i = self.inner.lock().unwrap();
            i.files.get(&h.0).map(|f| f.metadata())
        });
        let m = match by_fh {
            Some(m) => m.map_err(err),
            None => self
                .rel(ino)
                .and_then(|r| self.backing.join(r).symlink_metadata().map_err(err)),
        };
        match m {
            Ok(m) => reply.attr(&TTL, &self.attr(&m)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let run = || -> Result<FileAttr, Errno> {
            let rel = self.rel(ino)?;
            let p = self.backing.join(&rel);
            if let Some(m) = mode {
                fs::set_permissions(&p, fs::Permissions::from_mode(m & 0o7777)).map_err(err)?;
            }
            if let Some(s) = size {
                let f = fs::OpenOptions::new().write(true).open(&p).map_err(err)?;
                f.set_len(s).map_err(err)?;
                self.record(Op::Truncate(f.metadata().map_err(err)?.ino(), s));
            }
            self.entry(&rel)
        };
        match run() {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self
            .rel(ino)
            .and_then(|r| fs::read_link(self.backing.join(r)).map_err(err))
        {
            Ok(t) => reply.data(t.as_os_str().as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let run = || -> Result<FileAttr, Errno> {
            let rel = self.child(parent, name)?;
            let p = self.backing.join(&rel);
            fs::create_dir(&p).map_err(err)?;
            fs::set_permissions(&p, fs::Permissions::from_mode(mode & !umask & 0o7777))
                .map_err(err)?;
            self.record(Op::Mkdir(rel.clone()));
            self.entry(&rel)
        };
        match run() {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let run = || -> Result<(), Errno> {
            let rel = self.child(parent, name)?;
            fs::remove_file(self.backing.join(&rel)).map_err(err)?;
            self.record(Op::Unlink(rel));
            Ok(())
        };
        match run() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let run = || -> Result<(), Errno> {
            let rel = self.child(parent, name)?;
            fs::remove_dir(self.backing.join(&rel)).map_err(err)?;
            self.record(Op::Rmdir(rel));
            Ok(())
        };
        match run() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let run = || -> Result<FileAttr, Errno> {
            let rel = self.child(parent, link_name)?;
            std::os::unix::fs::symlink(target, self.backing.join(&rel)).map_err(err)?;
            self.record(Op::Symlink(rel.clone(), target.to_path_buf()));
            self.entry(&rel)
        };
        match run() {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let run = || -> Result<(), Errno> {
            if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
                return Err(Errno::EINVAL);
            }
            let a = self.child(parent, name)?;
            let b = self.child(newparent, newname)?;
            let (ca, cb) = (cstr(&self.backing.join(&a)), cstr(&self.backing.join(&b)));
            // SAFETY: two valid NUL-terminated paths; renameat2 reads them only.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    ca.as_ptr(),
                    libc::AT_FDCWD,
                    cb.as_ptr(),
                    flags.bits(),
                )
            };
            if rc != 0 {
                return Err(err(std::io::Error::last_os_error()));
            }
            self.record(Op::Rename(a.clone(), b.clone()));
            let mut i = self.inner.lock().unwrap();
            for p in i.paths.values_mut() {
                if let Some(to) = moved_to(p, &a, &b) {
                    *p = to;
                }
            }
            Ok(())
        };
        match run() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let run = || -> Result<FileAttr, Errno> {
            let a = self.rel(ino)?;
            let b = self.child(newparent, newname)?;
            fs::hard_link(self.backing.join(&a), self.backing.join(&b)).map_err(err)?;
            self.record(Op::Link(a.clone(), b.clone()));
            let a_attr = self.entry(&b)?;
            // The inode stays reachable by its first name while that lives.
            self.inner.lock().unwrap().paths.insert(a_attr.ino.0, a);
            Ok(a_attr)
        };
        match run() {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let run = || -> Result<u64, Errno> {
            let p = self.backing.join(self.rel(ino)?);
            let f = LazyFs::options(flags.0).open(&p).map_err(err)?;
            if flags.0 & libc::O_TRUNC != 0 {
                f.set_len(0).map_err(err)?;
                self.record(Op::Truncate(f.metadata().map_err(err)?.ino(), 0));
            }
            Ok(self.open_fh(f))
        };
        match run() {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let run = || -> Result<(FileAttr, u64), Errno> {
            let rel = self.child(parent, name)?;
            let p = self.backing.join(&rel);
            let existed = p.symlink_metadata().is_ok();
            let mut o = LazyFs::options(flags);
            o.create(true).mode(mode & !umask & 0o7777);
            if flags & libc::O_EXCL != 0 {
                o.create_new(true);
            }
            let f = o.open(&p).map_err(err)?;
            let ino = f.metadata().map_err(err)?.ino();
            if !existed {
                self.record(Op::Create(rel.clone(), ino));
            } else if flags & libc::O_TRUNC != 0 {
                f.set_len(0).map_err(err)?;
                self.record(Op::Truncate(ino, 0));
            }
            let a = self.entry(&rel)?;
            Ok((a, self.open_fh(f)))
        };
        match run() {
            Ok((a, fh)) => {
                reply.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let i = self.inner.lock().unwrap();
        let Some(f) = i.files.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let mut buf = vec![0; size as usize];
        let mut n = 0;
        while n < buf.len() {
            match f.read_at(&mut buf[n..], offset + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return reply.error(err(e)),
            }
        }
        reply.data(&buf[..n]);
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let i = self.inner.lock().unwrap();
        let Some(f) = i.files.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        match f.write_all_at(data, offset) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(err(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.inner.lock().unwrap().files.remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let i = self.inner.lock().unwrap();
        let Some(f) = i.files.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let run = || -> std::io::Result<(u64, Vec<u8>)> {
            let m = f.metadata()?;
            let mut buf = vec![0; m.len() as usize];
            f.read_exact_at(&mut buf, 0)?;
            Ok((m.ino(), buf))
        };
        match run() {
            Ok((ino, bytes)) => {
                self.record(Op::SyncFile(ino, bytes));
                reply.ok()
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let rel = match self.rel(ino) {
            Ok(r) => r,
            Err(e) => return reply.error(e),
        };
        let mut entries = vec![
            (ino.0, FileType::Directory, ".".into()),
            (1, FileType::Directory, "..".into()),
        ];
        match fs::read_dir(self.backing.join(&rel)) {
            Ok(rd) => {
                for e in rd.flatten() {
                    if let Ok(m) = e.path().symlink_metadata() {
                        entries.push((self.fuse_ino(m.ino()), kind(&m), e.file_name()));
                    }
                }
            }
            Err(e) => return reply.error(err(e)),
        }
        for (i, (ino, k, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, k, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.record(Op::SyncDir);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let c = cstr(&self.backing);
        // SAFETY: a valid path and a zeroed statvfs for the kernel to fill.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return reply.error(err(std::io::Error::last_os_error()));
        }
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            s.f_namemax as u32,
            s.f_frsize as u32,
        );
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }
}

/// A mounted [`LazyFs`], unmounted when dropped.
pub struct Mount {
    pub journal: Arc<Mutex<Journal>>,
    backing: PathBuf,
    at: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl Mount {
    /// Mounts `backing` at `at` (root only; no fusermount needed).
    pub fn new(backing: &Path, at: &Path) -> Result<Mount, String> {
        if !Path::new("/dev/fuse").exists() {
            return Err("/dev/fuse is missing".into());
        }
        let fs = LazyFs::new(backing);
        let journal = fs.journal.clone();
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![fuser::MountOption::FSName("lazyfs".into())];
        let session = fuser::spawn_mount(fs, at, &cfg).map_err(|e| format!("mount: {e}"))?;
        Ok(Mount {
            journal,
            backing: backing.to_path_buf(),
            at: at.to_path_buf(),
            session: Some(session),
        })
    }

    /// The flusher runs (as its timer would, every few seconds on a real
    /// machine): the data of every file, as it is now, is written back.
    /// Tree changes are not committed by it; a crash point after this step
    /// keeps the bytes, one before it does not.
    pub fn writeback(&self) {
        let mut j = self.journal.lock().unwrap();
        let mut stack = vec![self.backing.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let Ok(m) = e.path().symlink_metadata() else {
                    continue;
                };
                if m.is_dir() {
                    stack.push(e.path());
                } else if m.is_file() {
                    if let Ok(bytes) = fs::read(e.path()) {
                        j.ops.push(Op::Writeback(m.ino(), bytes));
                    }
                }
            }
        }
    }

    /// Unmounts; a mount still busy (a file left open) is detached.
    pub fn unmount(&mut self) {
        if let Some(s) = self.session.take() {
            if s.umount_and_join().is_err() {
                let c = cstr(&self.at);
                // SAFETY: a valid NUL-terminated path.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
    }
}
