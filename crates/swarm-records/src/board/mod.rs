//! Today's SwarmForge's cards and board (docs/swarmforge-compat.md §4): a
//! card is a task of a declared type (`card <type> <role>...`) that moves
//! lane by lane along its route as handoffs carry it, and ends in Done with
//! the last role's terminal handoff.
//!
//! **One truth.** The handoff files are the truth; the board is a function
//! of them. A card is born by the note `swarm card new` queues to the first
//! role of its route (`from: handoffd`, headers `task` and `card_type`; the
//! task text in `.swarmforge/board/<name>.txt`), and moved only by delivered
//! `git_handoff`s naming it in `task` ([`derive`]). `.swarmforge/board/tasks.tsv`
//! is that function written down, in upstream's columns, for the tools that
//! read it: handoffd rewrites it after every pass that delivered something
//! and on its first pass, under the board lock, temp + fsync + rename.
//!
//! **Crash between a delivery and the board write.** The delivery is done
//! (the original is in `sent/`) and tasks.tsv is one step behind. Nothing
//! is lost, because nothing is kept only in tasks.tsv but the audit count:
//! the next pass, or the next daemon's first pass, derives the same board
//! and writes it; writing it twice writes the same bytes. Until then
//! `swarm status` shows the derived board and says the file lags, and
//! `swarm audit --check` says "not OK" for a tasks.tsv that disagrees with
//! the handoffs (a lag, or a hand edit).
//!
//! Lanes: `new` (queued, not delivered yet), a role's name, `done`.
//! Columns: `name lane created updated task_id audit_count` (upstream's
//! `pack_web.bb`); a card's id is its name; `audit_count` is the one column
//! not derived (upstream counts audit challenges there) and is carried over.

pub mod copies;
pub mod lookup;
pub mod routes;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result, Token};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::grammar::{self, MessageType};
use crate::protocol::header::{names, Message};
use crate::protocol::layout::{Project, Worktree};
use crate::protocol::roles::Roles;
use crate::protocol::store;
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{Original, Place, Scope, Trail};

pub use routes::Routes;

/// The header naming a card's type (upstream's New Task note carries it).
pub const CARD_TYPE: &str = "card_type";
/// How a card's `git_handoff` moves it (upstream's reserved header).
pub const DELIVERY_KIND: &str = "delivery_kind";
/// The one card-moving delivery to the next role.
pub const FORWARD: &str = "forward";
/// A merge-only copy to an earlier role.
pub const REVERSE: &str = "reverse";
/// The last role's result to every role before it: the card is done.
pub const TERMINAL: &str = "terminal";
/// The header marking a merge-only copy (upstream's name, hyphen and all).
pub const NON_FORWARDING: &str = "non-forwarding";
/// The cards one `git_handoff` carries besides its `task`, as an EDN vector
/// (`["a" "b"]`): a batch role's one result for several cards (upstream's
/// `swarm_handoff.bb` writes it; its daemon moves each card named).
pub const BATCH_TASK_IDS: &str = "batch_task_ids";
/// A card queued but not yet with its first role.
pub const NEW: &str = "new";
/// A card whose last role sent the terminal handoff.
pub const DONE: &str = "done";
/// Longest card name (a file name, and within a note's 80-character message).
pub const MAX_NAME: usize = 64;
/// Largest task text.
pub const MAX_TEXT: usize = 16 * 1024;

/// One card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Card {
    pub name: String,
    /// The card type (not a tasks.tsv column; empty when read from the file).
    #[serde(rename = "type")]
    pub kind: String,
    pub lane: String,
    pub created: String,
    pub updated: String,
    pub task_id: String,
    pub audit_count: u64,
}

/// Every card, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Board {
    pub cards: Vec<Card>,
}

impl Board {
    /// tasks.tsv: one card a line, tab-separated.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.cards {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                c.name, c.lane, c.created, c.updated, c.task_id, c.audit_count
            ));
        }
        out
    }

    /// Reads tasks.tsv leniently (upstream's reader: blank lines skipped, an
    /// empty task_id is the name).
    pub fn parse(text: &str) -> Board {
        let cards = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let col = |i: usize| f.get(i).copied().unwrap_or("").to_string();
                let name = col(0);
                Card {
                    task_id: Some(col(4))
                        .filter(|s| !s.is_empty())
                        .unwrap_or(name.clone()),
                    name,
                    kind: String::new(),
                    lane: col(1),
                    created: col(2),
                    updated: col(3),
                    audit_count: col(5).parse().unwrap_or(0),
                }
            })
            .collect();
        Board { cards }
    }

    pub fn find(&self, name: &str) -> Option<&Card> {
        self.cards.iter().find(|c| c.name == name)
    }
}

/// The cards a message names: its `task`, then each of `batch_task_ids`
/// (a header that is no vector of strings names none, as upstream reads
/// it), each once.
pub fn cards_named(m: &Message) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let batch = m
        .get(BATCH_TASK_IDS)
        .and_then(crate::protocol::edn::parse_strings)
        .unwrap_or_default();
    for t in m
        .get(names::TASK)
        .map(str::to_string)
        .into_iter()
        .chain(batch)
    {
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The `batch_task_ids` value for the cards `ids` (an EDN vector).
pub fn batch_task_ids(ids: &[String]) -> String {
    crate::protocol::edn::render_strings(ids)
}

/// What a batch role's items are grouped by besides their priority
/// (upstream's `ready_for_next_batch.bb`, `batch-key`): the card type
/// (empty for an item of no card) and whether the item goes back
/// (`true`): a merge-only copy (`non-forwarding: true`, priority `00`) or,
/// here, a card's terminal result or any `delivery_kind: reverse`, which
/// upstream marks `non-forwarding: true` and we mark by `delivery_kind`.
pub fn batch_key(m: &Message) -> (String, bool) {
    let back = m.get(NON_FORWARDING) == Some("true")
        || m.priority() == Some("00")
        || matches!(m.get(DELIVERY_KIND), Some(REVERSE | TERMINAL));
    (m.get(CARD_TYPE).unwrap_or_default().to_string(), back)
}

/// Whether `m` carries a card its receiver must hand on (upstream's
/// `card-mail?`): a forward `git_handoff` or a card's first note, not a
/// merge-only copy or a terminal result.
pub fn carries_card(m: &Message) -> bool {
    !batch_key(m).1 && (m.kind() == Some(MessageType::GitHandoff) || birth(m).is_some())
}

/// `.swarmforge/board/` at the project root.
pub fn dir(project: &Project) -> PathBuf {
    project.swarmforge().join("board")
}

/// `.swarmforge/board/tasks.tsv`
pub fn tasks_file(project: &Project) -> PathBuf {
    dir(project).join("tasks.tsv")
}

/// `.swarmforge/board/<name>.txt`: the task text.
pub fn text_file(project: &Project, name: &str) -> PathBuf {
    dir(project).join(format!("{name}.txt"))
}

fn lock_file(project: &Project) -> PathBuf {
    dir(project).join(".lock")
}

fn tmp_dir(project: &Project) -> PathBuf {
    dir(project).join(".tmp")
}

/// The board the handoffs say, carrying `audit_count` over from `prev`.
pub fn derive(trail: &Trail, routes: &Routes, prev: &Board) -> Board {
    derive_marked(trail, routes, prev).0
}

/// [`derive`], and the latest delivered original it folded in (the
/// cache's mark, see [`sync_after`]).
fn derive_marked(trail: &Trail, routes: &Routes, prev: &Board) -> (Board, Option<Mark>) {
    let mut originals: Vec<&Original> = trail
        .originals
        .iter()
        .filter(|o| o.place != Place::Failed)
        .collect();
    originals.sort_by(|a, b| (a.when(), a.id()).cmp(&(b.when(), b.id())));
    let mut d = Deriving::new(routes, Vec::new());
    let mut mark = None;
    for o in originals {
        if o.place == Place::Sent && o.msg.get(names::TASK).is_some() {
            if let Some(w) = o.when() {
                mark = Some(Mark(clock::iso(w), o.id().to_string()));
            }
        }
        d.apply(o.place, o.when(), &o.msg);
    }
    (d.board(prev), mark)
}

/// When `m` was sent, as [`Original::when`] says it for a file holding it
/// (for a message not read back from a trail).
pub fn when_of(m: &Message) -> Option<clock::Instant> {
    crate::protocol::trail::Stamp::of(m.get(names::CREATED_AT))
        .at()
        .or_else(|| grammar::id_time(m.id().unwrap_or_default()))
}

/// The time and id of an original, in the order [`derive`] folds them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Mark(String, String);

/// The fold [`derive`] is: one original at a time, in time order.
struct Deriving<'a> {
    routes: &'a Routes,
    cards: Vec<Card>,
    index: BTreeMap<String, usize>,
}

impl<'a> Deriving<'a> {
    fn new(routes: &'a Routes, cards: Vec<Card>) -> Self {
        let index = cards
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Deriving {
            routes,
            cards,
            index,
        }
    }

    /// The board, with `audit_count` (the one column not derived) from `prev`.
    fn board(mut self, prev: &Board) -> Board {
        for c in &mut self.cards {
            c.audit_count = prev.find(&c.name).map_or(0, |p| p.audit_count);
        }
        Board { cards: self.cards }
    }

    fn apply(&mut self, place: Place, at: Option<clock::Instant>, m: &Message) {
        let Some(task) = m.get(names::TASK) else {
            return;
        };
        let when = at.map(clock::iso).unwrap_or_default();
        if let Some(kind) = birth(m) {
            if let Some(&i) = self.index.get(task) {
                // Folding (sync_after): the birth of a card still `new` in
                // the cache is delivered now, as a full derivation would
                // see it (the same note: the same time).
                let card = &mut self.cards[i];
                if place == Place::Sent && card.lane == NEW && card.created == when {
                    card.lane = m.to().unwrap_or(NEW).to_string();
                }
                return;
            }
            let lane = match place {
                Place::Sent => m.to().unwrap_or(NEW).to_string(),
                _ => NEW.to_string(),
            };
            self.index.insert(task.to_string(), self.cards.len());
            self.cards.push(Card {
                name: task.to_string(),
                kind: kind.to_string(),
                lane,
                created: when.clone(),
                updated: when,
                task_id: task.to_string(),
                audit_count: 0,
            });
            return;
        }
        if place != Place::Sent
            || m.kind() != Some(MessageType::GitHandoff)
            || m.get(NON_FORWARDING) == Some("true")
        {
            return;
        }
        // One result may carry several cards (`batch_task_ids`): each
        // moves by the same rule.
        for name in cards_named(m) {
            self.move_card(&name, m, when.clone());
        }
    }

    /// Moves card `name` as the delivered `git_handoff` `m` says.
    fn move_card(&mut self, name: &str, m: &Message, when: String) {
        let routes = self.routes;
        let Some(card) = self.index.get(name).map(|i| &mut self.cards[*i]) else {
            return;
        };
        let Some(route) = routes.route(&card.kind) else {
            return;
        };
        let from = m.sender().unwrap_or_default();
        // Only the role whose lane holds the card moves it: any other role
        // naming it (the route's last role sending its terminal handoff
        // early) would move a card someone else is working to Done, and
        // that role's own handoff would then be refused.
        if card.lane == DONE || card.lane == NEW || card.lane != from {
            return;
        }
        let to = grammar::role_list(m.to());
        let lane = if routes.is_terminal(route, from, &to) {
            Some(DONE.to_string())
        } else {
            let next = route
                .iter()
                .position(|r| r == from)
                .and_then(|i| route.get(i + 1));
            match next.filter(|n| to.contains(&n.as_str())) {
                Some(n) => Some(n.clone()),
                None => {
                    let on: Vec<&&str> = to
                        .iter()
                        .filter(|r| route.iter().any(|x| x == **r))
                        .collect();
                    (on.len() == 1).then(|| on[0].to_string())
                }
            }
        };
        if let Some(lane) = lane {
            card.lane = lane;
            card.updated = when;
        }
    }
}

/// The card type of a card's birth note, if `m` is one.
fn birth(m: &Message) -> Option<&str> {
    (m.sender() == Some(grammar::DAEMON) && m.kind() == Some(MessageType::Note))
        .then(|| m.get(CARD_TYPE))
        .flatten()
}

/// The largest tasks.tsv read (one line per card; a board this big is
/// not one a person wrote by hand).
const MAX_BOARD_BYTES: u64 = 16 * 1024 * 1024;

/// tasks.tsv as written; None when there is none.
pub fn read(project: &Project) -> Result<Option<Board>> {
    let path = tasks_file(project);
    match fsx::read_bounded(&path, MAX_BOARD_BYTES) {
        Ok(b) => Ok(Some(Board::parse(&String::from_utf8_lossy(&b)))),
        Err(fsx::ReadRefusal::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::bad_file(&path, e)),
    }
}

/// The board now: derived, and whether tasks.tsv says the same.
#[derive(Clone, Debug, Serialize)]
pub struct View {
    pub cards: Vec<Card>,
    /// Where tasks.tsv disagrees with the handoffs (empty: it agrees).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<String>,
    /// Why the board cannot be derived (a conf or swarm.yaml that does not
    /// read, a route naming no role).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl View {
    /// [`view`] for `swarm status`: a board that cannot be derived is a
    /// line of the status, not a failed status.
    pub fn for_status(swarm: &Swarm) -> Option<View> {
        view_in(swarm).unwrap_or_else(|e| {
            Some(View {
                cards: Vec::new(),
                disagreements: Vec::new(),
                problem: Some(e.to_string()),
            })
        })
    }
}

/// The derived board and tasks.tsv's disagreements with it; None when the
/// project declares no card.
pub fn view(project: &Project) -> Result<Option<View>> {
    view_in(&Swarm::new(project.clone()))
}

/// [`view`] in a loaded swarm.
pub fn view_in(swarm: &Swarm) -> Result<Option<View>> {
    let trail = Trail::load_in(swarm, &Scope::originals())?;
    view_of_in(swarm, &trail)
}

/// [`view`] from a trail already read (with its originals).
pub fn view_of(project: &Project, trail: &Trail) -> Result<Option<View>> {
    view_of_in(&Swarm::new(project.clone()), trail)
}

fn view_of_in(swarm: &Swarm, trail: &Trail) -> Result<Option<View>> {
    let project = &swarm.project;
    let routes = Routes::load_in(swarm)?;
    if routes.is_empty() {
        return Ok(None);
    }
    let file = read(project)?;
    let derived = derive(trail, &routes, file.as_ref().unwrap_or(&Board::default()));
    let disagreements = disagreements(file.as_ref(), &derived);
    Ok(Some(View {
        cards: derived.cards,
        disagreements,
        problem: None,
    }))
}

/// Where tasks.tsv (`file`) differs from the board the handoffs say.
fn disagreements(file: Option<&Board>, derived: &Board) -> Vec<String> {
    let Some(file) = file else {
        return if derived.cards.is_empty() {
            Vec::new()
        } else {
            vec![format!(
                "the file is missing; the handoffs hold {} card(s)",
                derived.cards.len()
            )]
        };
    };
    let mut out = Vec::new();
    for c in &derived.cards {
        match file.find(&c.name) {
            None => out.push(format!(
                "card '{}' is missing; the handoffs put it in lane '{}'",
                c.name, c.lane
            )),
            Some(f) if f.lane != c.lane => out.push(format!(
                "card '{}' is in lane '{}'; the handoffs put it in lane '{}'",
                c.name,
                crate::text::escape(&f.lane),
                c.lane
            )),
            Some(f)
                if (&f.created, &f.updated, &f.task_id) != (&c.created, &c.updated, &c.task_id) =>
            {
                out.push(format!(
                    "card '{}' has other times or another task_id than the handoffs say",
                    c.name
                ))
            }
            Some(_) => {}
        }
    }
    for f in &file.cards {
        if derived.find(&f.name).is_none() {
            out.push(format!(
                "card '{}' (lane '{}') was made by no handoff",
                crate::text::escape(&f.name),
                crate::text::escape(&f.lane)
            ));
        }
    }
    out
}

/// Derives the board and writes tasks.tsv when it differs (under the board
/// lock); None when the project declares no card. Idempotent.
pub fn sync(project: &Project, routes: &Routes) -> Result<Option<Board>> {
    if routes.is_empty() {
        return Ok(None);
    }
    fsx::ensure_dirs(&[dir(project), tmp_dir(project)]).at(dir(project))?;
    let _lock = fsx::lock(&lock_file(project)).at(lock_file(project))?;
    sync_locked(project, routes).map(Some)
}

fn sync_locked(project: &Project, routes: &Routes) -> Result<Board> {
    let trail = Trail::load(project, &Scope::originals())?;
    let file = read(project)?;
    let (board, mark) = derive_marked(&trail, routes, file.as_ref().unwrap_or(&Board::default()));
    write_board(project, routes, file.as_ref(), &board, mark)?;
    Ok(board)
}

/// Writes tasks.tsv when it differs, then the cache.
fn write_board(
    project: &Project,
    routes: &Routes,
    file: Option<&Board>,
    board: &Board,
    mark: Option<Mark>,
) -> Result<()> {
    if file != Some(&strip(board)) {
        let path = tasks_file(project);
        fsx::replace(&tmp_dir(project), &path, board.render().as_bytes()).at(&path)?;
    }
    let cache = Cache {
        routes: fingerprint(routes),
        mark,
        cards: board.cards.clone(),
    };
    let path = cache_file(project);
    let bytes = serde_json::to_vec(&cache).map_err(|e| Error::internal(e.to_string()))?;
    fsx::replace(&tmp_dir(project), &path, &bytes).at(&path)
}

/// What handoffd derived last, with what tasks.tsv cannot hold (each
/// card's type, and the latest delivered original folded in), so the next
/// pass folds in only what it delivered. Only a hint: rebuilt from the
/// files whenever it is missing, unreadable, made for other routes, or
/// cannot be continued exactly (see [`sync_after`]).
#[derive(Serialize, Deserialize)]
struct Cache {
    routes: String,
    mark: Option<Mark>,
    cards: Vec<Card>,
}

/// `.swarmforge/board/derived.json`
fn cache_file(project: &Project) -> PathBuf {
    dir(project).join("derived.json")
}

fn read_cache(project: &Project) -> Option<Cache> {
    let b = fsx::read_bounded(&cache_file(project), MAX_BOARD_BYTES).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The routes as the cache was made for (a change of routes may move cards).
fn fingerprint(routes: &Routes) -> String {
    format!(
        "{:?}|{:?}|{:?}",
        routes.cards, routes.propagation, routes.window
    )
}

/// [`sync`] after a delivery pass that delivered `delivered` (each with
/// its time, as [`Original::when`] gives it): the cached board with those
/// folded in, in time order, which is what [`derive`] gives when every one
/// of them is later than the cache's mark. Otherwise (no cache, other
/// routes, a card left `new` after the fold, whose birth may yet fail, or
/// a delivery older than the mark) the board is derived from every file,
/// as [`sync`] does. So a pass costs what it delivered, not the history.
pub fn sync_after(
    project: &Project,
    routes: &Routes,
    delivered: &[(Option<clock::Instant>, Message)],
) -> Result<Option<Board>> {
    if routes.is_empty() {
        return Ok(None);
    }
    fsx::ensure_dirs(&[dir(project), tmp_dir(project)]).at(dir(project))?;
    let _lock = fsx::lock(&lock_file(project)).at(lock_file(project))?;
    let file = read(project)?;
    let prev = file.clone().unwrap_or_default();
    let folded = read_cache(project)
        .filter(|c| c.routes == fingerprint(routes))
        .and_then(|c| {
            let mut ds: Vec<(Mark, &Message)> = Vec::new();
            for (at, m) in delivered
                .iter()
                .filter(|(_, m)| m.get(names::TASK).is_some())
            {
                ds.push((
                    Mark(clock::iso((*at)?), m.id().unwrap_or_default().to_string()),
                    m,
                ));
            }
            ds.sort_by(|a, b| a.0.cmp(&b.0));
            if ds
                .first()
                .is_some_and(|(k, _)| c.mark.as_ref().is_some_and(|m| k <= m))
            {
                return None;
            }
            let mut d = Deriving::new(routes, c.cards);
            for (k, m) in &ds {
                d.apply(Place::Sent, clock::parse(&k.0), m);
            }
            let mark = ds.last().map(|(k, _)| k.clone()).or(c.mark);
            let board = d.board(&prev);
            board
                .cards
                .iter()
                .all(|x| x.lane != NEW)
                .then_some((board, mark))
        });
    match folded {
        Some((board, mark)) => {
            write_board(project, routes, file.as_ref(), &board, mark)?;
            Ok(Some(board))
        }
        None => sync_locked(project, routes).map(Some),
    }
}

/// The board as tasks.tsv can hold it (no card types).
fn strip(b: &Board) -> Board {
    Board {
        cards: b
            .cards
            .iter()
            .map(|c| Card {
                kind: String::new(),
                ..c.clone()
            })
            .collect(),
    }
}

/// What `swarm card new` made.
#[derive(Debug, Serialize)]
pub struct NewCard {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The first role of the route: the card's first lane.
    pub first: String,
    /// The queued note that starts it.
    pub queued: PathBuf,
    pub text_file: PathBuf,
}

/// A card name: `[A-Za-z0-9][A-Za-z0-9._-]*`, at most [`MAX_NAME`], not a
/// reserved lane.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c));
    if !ok {
        return Err(format!(
            "card name '{}' is not a name: letters, digits, '.', '_', '-', starting with a letter or digit, at most {MAX_NAME}",
            crate::text::escape(name)
        ));
    }
    Ok(())
}

/// Why `swarm card new` is refused to the confined agent of `role`
/// (docs/security.md, "Confinement"): a card's first note comes from
/// handoffd, which an agent's own notes never can, and starting work on
/// the board is a person's act (upstream's New Task button), so it is not
/// one of the requests handoffd carries out for an agent.
pub fn refused_to_confined(project: &Project, role: &str, kind: &str, name: &str) -> Error {
    Error::conflict(format!(
        "role {role} runs confined, and a confined agent cannot start a card: its first note would come from handoffd (which no agent may speak as) and the board ({}) is read-only in the sandbox (docs/security.md \"Confinement\")\n  hint: ask a person to run `swarm card new {} {}` (a clarify to them), or send the work to a role yourself as a note with swarm-handoff",
        dir(project).display(),
        crate::text::escape(kind),
        crate::text::escape(name)
    ))
}

/// Starts a card: its text in `board/<name>.txt`, a note from handoffd to
/// the route's first role (which the daemon delivers like any note), and the
/// board written. Refused (`CARD_EXISTS`) when a card of that name exists.
pub fn new_card(project: &Project, kind: &str, name: &str, text: &str) -> Result<NewCard> {
    check_name(name).map_err(Error::bad_input)?;
    if text.len() > MAX_TEXT {
        return Err(Error::bad_input(format!(
            "the task text is {} bytes; at most {MAX_TEXT}",
            text.len()
        )));
    }
    if text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(Error::bad_input(
            "the task text holds control characters; only newlines and tabs may be in it",
        ));
    }
    let routes = Routes::load(project)?;
    let Some(route) = routes.route(kind) else {
        let known: Vec<&str> = routes.cards.keys().map(String::as_str).collect();
        return Err(Error::not_found(if known.is_empty() {
            format!(
                "no card types are declared: add `card <type> <role>...` lines to {} or `cards: {{<type>: [<role>, ...]}}` to {}",
                project.swarmforge_conf().display(),
                project.config_file().display()
            )
        } else {
            format!(
                "unknown card type '{}'; {} declares: {}",
                crate::text::escape(kind),
                routes.source.display(),
                known.join(", ")
            )
        }));
    };
    let first = route[0].clone();
    let roles = Roles::load(&project.roles_tsv())?;
    let role = roles
        .find(&first)
        .ok_or_else(|| Error::not_found(format!("role '{first}' is not in roles.tsv")))?;
    let wt = Worktree::new(role.worktree_in(&project.root));
    fsx::ensure_dirs(&[dir(project), tmp_dir(project)]).at(dir(project))?;
    let _lock = fsx::lock(&lock_file(project)).at(lock_file(project))?;
    let board = sync_locked(project, &routes)?;
    if let Some(c) = board.find(name) {
        return Err(Error::refused(
            Token::CardExists,
            format!("card '{name}' is on the board already (lane {})", c.lane),
            vec![tasks_file(project)],
        ));
    }
    let text_path = text_file(project, name);
    let mut text = text.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    fsx::replace(&tmp_dir(project), &text_path, text.as_bytes()).at(&text_path)?;
    let queued = queue_birth(project, &wt, kind, name, &first, &text)?;
    sync_locked(project, &routes)?;
    Ok(NewCard {
        name: name.to_string(),
        kind: kind.to_string(),
        first,
        queued,
        text_file: text_path,
    })
}

/// The note that starts a card, published into the first role's outbox
/// (its id from handoffd's own counter: cards start in several worktrees).
fn queue_birth(
    project: &Project,
    wt: &Worktree,
    kind: &str,
    name: &str,
    first: &str,
    text: &str,
) -> Result<PathBuf> {
    let message = format!("New card: {name}");
    let said = if text.is_empty() {
        format!("{message}\n")
    } else {
        text.to_string()
    };
    let queued = store::enqueue_from_daemon(project, wt, |id, now| {
        let mut msg = Message::default();
        msg.set(names::ID, id);
        msg.set(names::FROM, grammar::DAEMON);
        msg.set(names::TO, first);
        msg.set(names::PRIORITY, "50");
        msg.set(names::TYPE, MessageType::Note.name());
        msg.set(names::TASK, name);
        msg.set(CARD_TYPE, kind);
        msg.set(names::MESSAGE, &message);
        msg.set(names::CREATED_AT, clock::iso(now));
        msg.body = format!("{}\n\n{said}", crate::protocol::draft::BODY_PREAMBLE);
        msg
    })?;
    Ok(queued.path)
}

/// Whether `msg`, sitting in the outbox of `owner`, is a card's birth note
/// that handoffd may deliver although `from: handoffd` (only `swarm card
/// new` writes it, into the first role's own outbox, addressed to it).
pub fn is_birth_in_own_outbox(msg: &Message, owner: &dyn Fn(&str) -> bool) -> bool {
    birth(msg).is_some()
        && msg.get(names::TASK).is_some()
        && msg.to().is_some_and(|to| !to.contains(',') && owner(to))
}

/// `swarm status`'s lines for the board.
pub fn text(v: &View) -> String {
    let mut out = String::new();
    if let Some(p) = &v.problem {
        return format!("board: cannot be read: {}\n", crate::text::escape(p));
    }
    if v.cards.is_empty() {
        out.push_str("board: no cards\n");
    }
    for c in &v.cards {
        out.push_str(&format!(
            "board: {} ({}) {}{}\n",
            c.name,
            c.kind,
            c.lane,
            if c.audit_count > 0 {
                format!(", {} audit(s)", c.audit_count)
            } else {
                String::new()
            }
        ));
    }
    for d in &v.disagreements {
        out.push_str(&format!(
            "board: NOT IN STEP with .swarmforge/board/tasks.tsv: {d}\n"
        ));
    }
    out
}

/// Where the audit gate counts a challenge: the card's `audit_count` (as
/// upstream's `pack_board.sh increment-audit`). A task that is no card is
/// not counted.
pub fn count_audit(project: &Project, task: &str) -> Result<()> {
    count_audit_once(project, task, None)
}

/// [`count_audit`] exactly once for one request of a confined agent
/// (forum/requests.rs), whatever is killed when: under the board lock,
/// `mark` (the request's own file, which only handoffd writes) records the
/// count before the raise; found again after a kill, a count above it says
/// the raise was written (counts only grow under this lock), an equal one
/// that it was not.
pub fn count_audit_once(
    project: &Project,
    task: &str,
    mark: Option<&std::path::Path>,
) -> Result<()> {
    let routes = Routes::load(project)?;
    if routes.is_empty() {
        return Ok(());
    }
    fsx::ensure_dirs(&[dir(project), tmp_dir(project)]).at(dir(project))?;
    let _lock = fsx::lock(&lock_file(project)).at(lock_file(project))?;
    let mut board = sync_locked(project, &routes)?;
    let Some(c) = board.cards.iter_mut().find(|c| c.name == task) else {
        return Ok(());
    };
    if let Some(mark) = mark {
        let before = fsx::read_bounded(mark, 64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| t.trim().parse::<u64>().ok());
        match before {
            Some(n) if c.audit_count > n => return Ok(()),
            Some(_) => {}
            None => {
                let d = mark.parent().unwrap_or(std::path::Path::new("."));
                let _ = fsx::remove_file(mark);
                fsx::publish(d, mark, format!("{}\n", c.audit_count).as_bytes()).at(mark)?;
            }
        }
    }
    c.audit_count += 1;
    let path = tasks_file(project);
    fsx::replace(&tmp_dir(project), &path, board.render().as_bytes()).at(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(headers: &[(&str, &str)]) -> Message {
        let mut m = Message::default();
        for (k, v) in headers {
            m.set(k, *v);
        }
        m
    }

    /// Upstream's `ready_for_next_batch.bb`: `batch-key` is the priority,
    /// the `card_type` ("" without one) and whether the file goes back
    /// (`non-forwarding: true` or priority `00`); our terminal results and
    /// copies say it by `delivery_kind` too.
    #[test]
    fn the_batch_key_is_the_card_type_and_the_direction() {
        let fwd = msg(&[("priority", "50"), (CARD_TYPE, "change")]);
        assert_eq!(batch_key(&fwd), ("change".to_string(), false));
        assert_eq!(
            batch_key(&msg(&[("priority", "50")])),
            (String::new(), false)
        );
        for back in [
            msg(&[
                ("priority", "50"),
                (CARD_TYPE, "change"),
                (NON_FORWARDING, "true"),
            ]),
            msg(&[("priority", "00"), (CARD_TYPE, "change")]),
            msg(&[
                ("priority", "50"),
                (CARD_TYPE, "change"),
                (DELIVERY_KIND, TERMINAL),
            ]),
            msg(&[
                ("priority", "50"),
                (CARD_TYPE, "change"),
                (DELIVERY_KIND, REVERSE),
            ]),
        ] {
            assert_eq!(batch_key(&back), ("change".to_string(), true), "{back:?}");
            assert!(!carries_card(&back));
        }
    }

    /// Upstream's `handoff_lib.bb` (`mail-card-ids`): a mail's cards are its
    /// task plus any `batch_task_ids`; a malformed vector names none.
    #[test]
    fn a_message_names_its_task_and_its_batch_task_ids() {
        let m = msg(&[
            (names::TASK, "pits"),
            (BATCH_TASK_IDS, r#"["pits" "bats"]"#),
        ]);
        assert_eq!(cards_named(&m), ["pits", "bats"]);
        let bad = msg(&[(names::TASK, "pits"), (BATCH_TASK_IDS, "pits,bats")]);
        assert_eq!(cards_named(&bad), ["pits"]);
        assert_eq!(batch_task_ids(&["a".into(), "b".into()]), r#"["a" "b"]"#);
    }
}
