//! Writing tasks.tsv after a pass, under the board lock, temp + fsync +
//! rename, from a cache that lets a pass fold in only what it delivered.
//! The invariant: the cache is only a hint, rebuilt from the files whenever
//! it cannot be continued exactly, so the file written is the board the
//! handoffs say; writing it twice writes the same bytes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fsx;
use crate::protocol::clock;
use crate::protocol::header::{names, Message};
use crate::protocol::layout::Project;
use crate::protocol::trail::{Place, Scope, Trail};

use super::derive::{derive_marked, Deriving, Mark};
use super::routes::Routes;
use super::{dir, lock_file, read, tasks_file, tmp_dir, Board, Card, MAX_BOARD_BYTES, NEW};

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

pub(super) fn sync_locked(project: &Project, routes: &Routes) -> Result<Board> {
    let trail = Trail::load(project, &Scope::originals())?;
    let file = read(project)?;
    let (board, mark) = derive_marked(&trail, routes, file.as_ref().unwrap_or(&Board::default()));
    write_board(project, routes, file.as_ref(), &board, mark)?;
    Ok(board)
}

/// Writes tasks.tsv when it differs, then the cache.
pub(super) fn write_board(
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
pub(super) struct Cache {
    pub(super) routes: String,
    pub(super) mark: Option<Mark>,
    pub(super) cards: Vec<Card>,
}

/// `.swarmforge/board/derived.json`
pub(super) fn cache_file(project: &Project) -> PathBuf {
    dir(project).join("derived.json")
}

pub(super) fn read_cache(project: &Project) -> Option<Cache> {
    let b = fsx::read_bounded(&cache_file(project), MAX_BOARD_BYTES).ok()?;
    serde_json::from_slice(&b).ok()
}

/// The routes as the cache was made for (a change of routes may move cards).
pub(super) fn fingerprint(routes: &Routes) -> String {
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
pub(super) fn strip(b: &Board) -> Board {
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
