//! Every path of a project and of a worktree, in one place (docs/protocol.md
//! §1).

use std::path::{Path, PathBuf};

/// The folder of held originals, as SwarmForge names it.
pub const PENDING_APPROVAL: &str = "pending_approval";
/// The name that folder had here before (read only to move its files).
pub const OLD_HELD: &str = "held";

/// The project root: `roles.tsv`, the daemon's folder, the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    pub root: PathBuf,
}

impl Project {
    /// SwarmForge's constitution: present in a SwarmForge project.
    pub fn constitution(&self) -> PathBuf {
        self.root.join("swarmforge").join("constitution.prompt")
    }
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Project { root: root.into() }
    }
    pub fn swarmforge(&self) -> PathBuf {
        self.root.join(".swarmforge")
    }
    pub fn roles_tsv(&self) -> PathBuf {
        self.swarmforge().join("roles.tsv")
    }
    pub fn tmux_socket(&self) -> PathBuf {
        self.swarmforge().join("tmux-socket")
    }
    pub fn forum_log(&self) -> PathBuf {
        self.swarmforge().join("forum.log")
    }
    /// What handoffd moved aside from the project's own git folder because
    /// the person's git would have followed it (daemon/git_guard.rs).
    pub fn planted_dir(&self) -> PathBuf {
        self.swarmforge().join("planted")
    }
    /// Git objects written by confined agents, on their way into the
    /// project's store (daemon/objects/): one quarantine folder per role
    /// (its sandbox's `.git/objects`), and what was refused.
    pub fn objects_dir(&self) -> PathBuf {
        self.swarmforge().join("objects")
    }
    pub fn quarantine_dir(&self) -> PathBuf {
        self.objects_dir().join("quarantine")
    }
    pub fn object_quarantine(&self, role: &str) -> PathBuf {
        self.quarantine_dir().join(role)
    }
    pub fn refused_objects_dir(&self) -> PathBuf {
        self.objects_dir().join("refused")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.swarmforge().join("state")
    }
    /// Forum sessions and discussions: small header-format records.
    pub fn forum_dir(&self) -> PathBuf {
        self.swarmforge().join("forum")
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.forum_dir().join("sessions")
    }
    pub fn discussions_dir(&self) -> PathBuf {
        self.forum_dir().join("discussions")
    }
    /// Serialises changes to sessions and discussions.
    pub fn forum_lock(&self) -> PathBuf {
        self.forum_dir().join("forum.flock")
    }
    pub fn daemon_dir(&self) -> PathBuf {
        self.swarmforge().join("daemon")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.daemon_dir().join("handoffd.pid")
    }
    /// The one counter of every message `handoffd` itself sends, whichever
    /// worktree's outbox it is published in (protocol::sequence).
    pub fn daemon_sequence(&self) -> PathBuf {
        self.daemon_dir().join("sequence")
    }
    pub fn daemon_sequence_lock(&self) -> PathBuf {
        self.daemon_dir().join("sequence.flock")
    }
    pub fn stop_file(&self) -> PathBuf {
        self.daemon_dir().join("stop")
    }
    pub fn log_file(&self) -> PathBuf {
        self.daemon_dir().join("handoffd.log")
    }
    pub fn events_file(&self) -> PathBuf {
        self.daemon_dir().join("events.jsonl")
    }
    /// Today's SwarmForge's durable queue of failed wake-ups: one file per
    /// role (protocol::wakeups).
    pub fn wakeups_dir(&self) -> PathBuf {
        self.daemon_dir().join("wakeups")
    }
    /// One record per delivery that failed three times and is still being
    /// retried, at the project root, where today's SwarmForge keeps them
    /// (protocol::delivery_retry).
    pub fn delivery_attention_dir(&self) -> PathBuf {
        self.swarmforge()
            .join("handoffs")
            .join("delivery_attention")
    }
    /// The daemon's order hint socket (protocol::order).
    pub fn order_socket(&self) -> PathBuf {
        self.daemon_dir().join("order.sock")
    }
    /// The daemon's stdout/stderr when started detached (never its journal).
    pub fn daemon_output(&self) -> PathBuf {
        self.daemon_dir().join("handoffd.out")
    }
    /// `swarm pause`'s state: present while delivery (of some types) is
    /// paused; `swarm resume` removes it.
    pub fn pause_file(&self) -> PathBuf {
        self.swarmforge().join("paused")
    }
    /// One record per approved held handoff (`<id>`), written by `swarm
    /// approve` before the original goes back to its outbox.
    pub fn approvals_dir(&self) -> PathBuf {
        self.swarmforge().join("approvals")
    }
    /// Temp files for the pause file and approval records.
    pub fn approvals_tmp(&self) -> PathBuf {
        self.approvals_dir().join("tmp")
    }
    /// SwarmForge's dashboard folders: its request files, derived here
    /// from the messages (protocol::dashboard).
    pub fn dashboard_dir(&self) -> PathBuf {
        self.swarmforge().join("dashboard")
    }
    /// A clarify to a person as SwarmForge's `<id>.request`, in `done/`
    /// once answered, else `pending/`.
    pub fn clarification_requests(&self, done: bool) -> PathBuf {
        self.dashboard_dir()
            .join("clarifications")
            .join(if done { "done" } else { "pending" })
    }
    /// A person's chat post to the master role as SwarmForge's
    /// `<id>.request`, in `done/` (with the reply) once replied to.
    pub fn chat_requests(&self, done: bool) -> PathBuf {
        self.dashboard_dir()
            .join("requests")
            .join(if done { "done" } else { "pending" })
    }
    /// `swarm serve`'s state: the access token (mode 0600).
    pub fn serve_dir(&self) -> PathBuf {
        self.swarmforge().join("serve")
    }
    /// `swarm a2a`'s state: its token, tasks and push configs.
    pub fn a2a_dir(&self) -> PathBuf {
        self.swarmforge().join("a2a")
    }
    pub fn serve_token(&self) -> PathBuf {
        self.serve_dir().join("token")
    }
    /// `swarm.yaml`, the optional project config.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("swarm.yaml")
    }
    /// Which of `swarm.yaml`'s `hosts` this checkout is (`swarm init --host`).
    pub fn host_file(&self) -> PathBuf {
        self.swarmforge().join("host")
    }
    /// The bridge's state (docs/bridge.md).
    pub fn bridge_dir(&self) -> PathBuf {
        self.swarmforge().join("bridge")
    }
    /// The proxy worktree of a role on another host: the daemon delivers into
    /// its `inbox/new` like any inbox, the bridge drains it to JetStream.
    pub fn bridge_proxy(&self, role: &str) -> PathBuf {
        self.bridge_dir().join("out").join(role)
    }
    /// Where the bridge spools what arrives for local role `role`: a
    /// worktree-shaped folder whose outbox the daemon delivers from like any
    /// other (its checks, `swarm pause`, approvals), so the daemon stays the
    /// one writer of every `inbox/new` (docs/bridge.md, "One deliverer").
    pub fn bridge_relay(&self, role: &str) -> PathBuf {
        self.bridge_relay_dir().join(role)
    }
    /// The parent of every [`Project::bridge_relay`] folder.
    pub fn bridge_relay_dir(&self) -> PathBuf {
        self.bridge_dir().join("in")
    }
    /// The roles that have a relay folder, by name (what arrived for them
    /// from other hosts; none without a bridge).
    pub fn relayed_roles(&self) -> Vec<String> {
        names_in(&self.bridge_relay_dir())
    }
    /// The newest trail mark received from each other host, one file per host.
    pub fn bridge_marks(&self) -> PathBuf {
        self.bridge_dir().join("marks")
    }
    /// The hosts a trail mark was received from.
    pub fn marked_hosts(&self) -> Vec<String> {
        names_in(&self.bridge_marks())
    }
    /// Held (flock) by the one running bridge; holds its pid.
    pub fn bridge_pid(&self) -> PathBuf {
        self.bridge_dir().join("bridge.pid")
    }
    pub fn bridge_log(&self) -> PathBuf {
        self.bridge_dir().join("bridge.log")
    }
    /// The bridge's stdout/stderr when `swarm up` started it.
    pub fn bridge_output(&self) -> PathBuf {
        self.bridge_dir().join("bridge.out")
    }
    /// One file per received item that waits (for its commit), holding why.
    pub fn bridge_waiting(&self) -> PathBuf {
        self.bridge_dir().join("waiting")
    }
    /// How far this host's `events.jsonl` has been published (a byte offset).
    pub fn bridge_events_offset(&self) -> PathBuf {
        self.bridge_dir().join("events.offset")
    }
    /// Every host's events as the bridge received them from the stream.
    pub fn bridge_events(&self) -> PathBuf {
        self.bridge_dir().join("events")
    }
    /// What the bridge refused as not another host's word (bridge::refusals).
    pub fn bridge_refused(&self) -> PathBuf {
        self.bridge_dir().join("refused.jsonl")
    }
    /// The files of worktree `wt` (its roles.tsv column 2; `none` counts
    /// as `master`) on another host, as that host's bridge published them:
    /// worktree-shaped, read by the trail for the roles working there.
    pub fn bridge_mirror(&self, host: &str, wt: &str) -> PathBuf {
        let wt = if wt == "none" { "master" } else { wt };
        self.bridge_dir().join("hosts").join(host).join(wt)
    }
    /// How far the mirror of host `host`'s files has caught up: the offset
    /// in its events before which every file it had was mirrored
    /// (docs/bridge.md, "One trail").
    pub fn bridge_trail_mark(&self, host: &str) -> PathBuf {
        self.bridge_marks().join(host)
    }
    /// Temp files of the bridge's own publishes.
    pub fn bridge_tmp(&self) -> PathBuf {
        self.bridge_dir().join("tmp")
    }
    /// The inbox of a human role that has no worktree of its own: a
    /// worktree-shaped state folder (no git checkout), so no agent's
    /// `ready-next` can take a person's mail (protocol::people).
    pub fn person_inbox(&self, role: &str) -> PathBuf {
        self.swarmforge().join("people").join(role)
    }
    /// What agents do and what it costs: per-role activity, sessions and
    /// the usage journal (telemetry).
    pub fn telemetry_dir(&self) -> PathBuf {
        self.swarmforge().join("telemetry")
    }
    /// One JSON line per agent turn's token usage (telemetry::usage).
    pub fn usage_file(&self) -> PathBuf {
        self.telemetry_dir().join("usage.jsonl")
    }
    /// One role's activity: what its agent did, one JSON line per event
    /// (telemetry::activity).
    pub fn activity_file(&self, role: &str) -> PathBuf {
        self.telemetry_dir()
            .join("activity")
            .join(format!("{role}.jsonl"))
    }
    /// SwarmForge's `mission.md`: the project's mission, at its top
    /// (served as `GET /api/mission`).
    pub fn mission_file(&self) -> PathBuf {
        self.root.join("mission.md")
    }
    /// SwarmForge's launcher config.
    pub fn swarmforge_conf(&self) -> PathBuf {
        self.root.join("swarmforge").join("swarmforge.conf")
    }
}

/// One worktree's handoff state (`<wt>/.swarmforge/handoffs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worktree {
    pub root: PathBuf,
}

impl Worktree {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Worktree { root: root.into() }
    }
    pub fn swarmforge(&self) -> PathBuf {
        self.root.join(".swarmforge")
    }
    /// Pointer from a role worktree to its project root (written by `swarm init`).
    pub fn project_pointer(&self) -> PathBuf {
        self.swarmforge().join("project-root")
    }
    pub fn handoffs(&self) -> PathBuf {
        self.swarmforge().join("handoffs")
    }
    /// The audit gate's open challenges (agent::send::audit_gate): one
    /// folder per sender, `<sha256(sender)>/<sha256(task)>`, as today's
    /// SwarmForge keeps them (docs/swarmforge-compat.md §3).
    pub fn audit_pending(&self) -> PathBuf {
        self.handoffs().join("audit_pending")
    }
    pub fn sequence(&self) -> PathBuf {
        self.handoffs().join("sequence")
    }
    /// flock(2) file serialising sequence allocation (replaces SwarmForge's
    /// `sequence.lock/` mkdir lock, which went stale when a sender died).
    pub fn sequence_lock(&self) -> PathBuf {
        self.handoffs().join("sequence.flock")
    }
    pub fn outbox(&self) -> PathBuf {
        self.handoffs().join("outbox")
    }
    pub fn outbox_tmp(&self) -> PathBuf {
        self.outbox().join("tmp")
    }
    pub fn sent(&self) -> PathBuf {
        self.handoffs().join("sent")
    }
    pub fn failed(&self) -> PathBuf {
        self.handoffs().join("failed")
    }
    /// Originals waiting for a person's `swarm approve` / `swarm deny`
    /// (`approval: required` in swarm.yaml): SwarmForge's own approval
    /// folder, so its dashboard and ours read one place
    /// (protocol::pending_approval, docs/swarmforge-compat.md §5). At the
    /// project root (the master role's worktree in SwarmForge's layout) it
    /// is exactly the folder upstream's dashboard lists.
    pub fn held(&self) -> PathBuf {
        self.handoffs().join(PENDING_APPROVAL)
    }
    /// Where held originals lived before they moved to
    /// [`Worktree::held`]: emptied by handoffd when it starts
    /// (protocol::pending_approval::adopt_old_held); a file left there is reported.
    pub fn old_held(&self) -> PathBuf {
        self.handoffs().join(OLD_HELD)
    }
    pub fn inbox(&self) -> PathBuf {
        self.handoffs().join("inbox")
    }
    pub fn inbox_new(&self) -> PathBuf {
        self.inbox().join("new")
    }
    pub fn in_process(&self) -> PathBuf {
        self.inbox().join("in_process")
    }
    pub fn completed(&self) -> PathBuf {
        self.inbox().join("completed")
    }
    /// Temp files for inbox publishes and header stamps; never listed as a queue.
    pub fn inbox_tmp(&self) -> PathBuf {
        self.inbox().join("tmp")
    }
    /// Items the helpers refused to hand out (malformed, symlinks, FIFOs).
    pub fn rejected(&self) -> PathBuf {
        self.inbox().join("rejected")
    }
    /// Finished items moved out of the live folders by `swarm archive`:
    /// `archive/<YYYY-MM-DD>/{sent,failed,completed}/`, by the day the
    /// message was created.
    pub fn archive(&self) -> PathBuf {
        self.handoffs().join("archive")
    }

    /// The day folders of [`Worktree::archive`], oldest first; none when
    /// nothing was archived. Only names of the shape `swarm archive` makes.
    pub fn archive_days(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(self.archive()) else {
            return Vec::new();
        };
        let mut days: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                e.file_type().is_ok_and(|t| t.is_dir())
                    && chrono::NaiveDate::parse_from_str(&n, "%Y-%m-%d").is_ok()
            })
            .map(|e| e.path())
            .collect();
        days.sort();
        days
    }

    /// The one lock every queue transition of this inbox holds.
    pub fn inbox_lock(&self) -> PathBuf {
        self.handoffs().join("inbox.flock")
    }

    /// Every folder a message of this worktree moves through (outbox, held,
    /// sent, failed and the inbox's): what a watcher of its mail listens to.
    pub fn queue_dirs(&self) -> [PathBuf; 7] {
        [
            self.outbox(),
            self.held(),
            self.sent(),
            self.failed(),
            self.inbox_new(),
            self.in_process(),
            self.completed(),
        ]
    }
    pub fn send_dirs(&self) -> [PathBuf; 4] {
        [self.outbox_tmp(), self.outbox(), self.sent(), self.failed()]
    }

    pub fn inbox_dirs(&self) -> [PathBuf; 4] {
        [
            self.inbox_new(),
            self.in_process(),
            self.completed(),
            self.inbox_tmp(),
        ]
    }

    /// The first of this worktree's inbox folders (`.swarmforge`, `handoffs`,
    /// `inbox` and the folders in it) that is a symlink. A symlink there would
    /// send a copy wherever it points (outside the project, or into another
    /// role's inbox), so nothing is delivered into, or cleaned in, such an
    /// inbox. A missing folder is fine: it is created as a plain one.
    pub fn symlinked_inbox_folder(&self) -> Option<PathBuf> {
        let inbox = self.inbox();
        let mut chain = vec![self.swarmforge(), self.handoffs(), inbox.clone()];
        chain.extend(self.inbox_dirs());
        for d in chain {
            match std::fs::symlink_metadata(&d) {
                Ok(m) if m.file_type().is_symlink() => return Some(d),
                Ok(_) => {}
                // Nothing below a missing folder exists either.
                Err(_) if d == inbox || d == self.handoffs() || d == self.swarmforge() => {
                    return None
                }
                Err(_) => {}
            }
        }
        None
    }

    pub fn all_dirs(&self) -> Vec<PathBuf> {
        let mut v = self.send_dirs().to_vec();
        v.extend(self.inbox_dirs());
        v
    }
}

/// Why nothing is delivered into an inbox with a symlinked folder (the
/// daemon's deferral reason and `swarm status`'s problem line).
pub fn symlinked_inbox_reason(link: &Path) -> String {
    format!(
        "recipient folder {} is a symlink; a copy would land wherever it points, so nothing is delivered there until it is a plain folder of its worktree",
        link.display()
    )
}

/// The entry names of a state folder of the project's own (none when it
/// does not exist).
pub fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}
