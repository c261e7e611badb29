//! The board as a person sees it: derived from the handoffs, with what
//! tasks.tsv says differently. The invariant: a view only reads; a
//! tasks.tsv that disagrees with the handoffs (a lag, or a hand edit) is
//! named, never believed.

use serde::Serialize;

use crate::board::derive;
use crate::error::Result;
use crate::protocol::layout::Project;
use crate::protocol::swarm::Swarm;
use crate::protocol::trail::{Scope, Trail};

use super::routes::Routes;
use super::{read, Board, Card};

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

/// [`view_of`] in a loaded swarm.
pub fn view_of_in(swarm: &Swarm, trail: &Trail) -> Result<Option<View>> {
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
pub(super) fn disagreements(file: Option<&Board>, derived: &Board) -> Vec<String> {
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
