//! Receipts: where one message is at each of its recipients (`new`,
//! `in_process`, `completed` or missing), with the stamps of each stage, and
//! whether its original was sent or failed (and why). A file the journal
//! does not vouch for (views/vouched.rs) is listed as unverified, and a
//! sender only such files claim is not shown as the sender.

use serde_json::{json, Value};

use crate::error::Result;
use crate::protocol::clock;
use crate::protocol::grammar::in_cc;
use crate::protocol::header::Header;
use crate::protocol::layout::Project;
use crate::protocol::trail::{Copy, Original, Place, Scope, Stamp, Trail};
use crate::text::escape;
use crate::views::vouched;

/// One recipient's state; `copy` is `None` when it never got the message.
#[derive(Debug)]
pub struct Receipt<'a> {
    pub role: String,
    /// False for a copy whose recipient the `to` header does not name.
    pub addressed: bool,
    pub copy: Option<&'a Copy>,
    /// The copy is addressed to this other role, which shares the inbox (the
    /// daemon delivers once per inbox).
    pub shared_with: Option<String>,
}

/// Everything known about one id.
#[derive(Debug)]
pub struct Receipts<'a> {
    pub id: String,
    pub originals: Vec<&'a Original>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub kind: Option<String>,
    pub created_at: Option<String>,
    pub receipts: Vec<Receipt<'a>>,
    /// Files of this id not to be shown as said: path and why.
    pub unverified: Vec<(std::path::PathBuf, String)>,
    /// `from` and `to` come only from such files.
    pub claimed: bool,
}

/// The trail [`collect`] needs for `id`: file names embed the id, so only
/// those files are read; a hand-made name without it is still found by the
/// full scan this falls back to.
pub fn trail_of(project: &Project, id: &str) -> Result<Trail> {
    let narrow = Scope {
        name_contains: Some(id.to_string()),
        ..Scope::all()
    };
    let t = Trail::load(project, &narrow)?;
    if collect(&t, id).is_some() {
        return Ok(t);
    }
    Trail::load(project, &Scope::all())
}

/// Collects the receipts of `id` from a trail (read with both originals and
/// copies). `None` when no file carries that id.
pub fn collect<'a>(t: &'a Trail, id: &str) -> Option<Receipts<'a>> {
    let originals: Vec<&Original> = t.originals.iter().filter(|o| o.id() == id).collect();
    let copies: Vec<&Copy> = t
        .copies
        .iter()
        .filter(|c| c.id.as_deref() == Some(id))
        .collect();
    if originals.is_empty() && copies.is_empty() {
        return None;
    }
    // The original speaks for the message; a copy stands in when it is gone.
    let head = |n: Header| -> Option<String> {
        originals
            .iter()
            .find_map(|o| o.msg.get(n).map(str::to_string))
    };
    let from = head(Header::From).or_else(|| copies.iter().find_map(|c| c.from.clone()));
    let to = head(Header::To).or_else(|| copies.iter().find_map(|c| c.to.clone()));
    let mut r = Receipts {
        id: id.to_string(),
        kind: head(Header::Type),
        created_at: head(Header::CreatedAt),
        originals,
        from,
        to,
        receipts: Vec::new(),
        unverified: Vec::new(),
        claimed: false,
    };
    judge(t, &mut r, &copies);
    let f = r.from.clone().unwrap_or_default();
    let named = t.roles.recipients(r.to.as_deref().unwrap_or(""), &f);
    for role in &named {
        let mine: Vec<&Copy> = copies
            .iter()
            .copied()
            .filter(|c| c.recipient.as_deref() == Some(role.as_str()))
            .collect();
        if mine.is_empty() {
            let home = t.home(role);
            let shared = copies.iter().copied().find(|c| {
                home.is_some_and(|h| h == c.worktree)
                    && c.recipient
                        .as_deref()
                        .is_some_and(|x| named.iter().any(|n| n == x))
            });
            r.receipts.push(Receipt {
                role: role.clone(),
                addressed: true,
                copy: shared,
                shared_with: shared.and_then(|c| c.recipient.clone()),
            });
        }
        for c in mine {
            r.receipts.push(Receipt {
                role: role.clone(),
                addressed: true,
                copy: Some(c),
                shared_with: None,
            });
        }
    }
    for c in copies {
        let role = c.recipient.clone().unwrap_or_default();
        if !named.contains(&role) {
            r.receipts.push(Receipt {
                role,
                addressed: false,
                copy: Some(c),
                shared_with: None,
            });
        }
    }
    Some(r)
}

/// Holds each file of the message to the journal: the doubtful ones are
/// listed, and `claimed` set when what speaks for the message (its
/// originals, or its copies when none is left) is all doubtful.
fn judge(t: &Trail, r: &mut Receipts, copies: &[&Copy]) {
    let (of_originals, of_copies) = vouched::judge_files(t, &r.originals, copies);
    r.claimed = if of_originals.is_empty() {
        !of_copies.is_empty() && of_copies.iter().all(|v| !v.said())
    } else {
        of_originals.iter().all(|v| !v.said())
    };
    let paths = r
        .originals
        .iter()
        .map(|o| &o.path)
        .chain(copies.iter().map(|c| &c.path));
    for (p, verdict) in paths.zip(of_originals.iter().chain(&of_copies)) {
        if let Some(why) = verdict.doubt() {
            r.unverified.push((p.clone(), why.to_string()));
        }
    }
}

/// Whether the file at `p` is one of the unverified.
fn doubted(r: &Receipts, p: &std::path::Path) -> bool {
    r.unverified.iter().any(|(u, _)| u == p)
}

/// A context copy for a role the message names in `cc` (not a defect).
fn cc_copy(x: &Receipt) -> bool {
    x.copy.is_some_and(|c| in_cc(c.cc.as_deref(), &x.role))
}

fn stamp_text(s: &Stamp, raw_missing: &str) -> String {
    match s {
        Stamp::Missing => raw_missing.to_string(),
        Stamp::Bad(v) => format!("invalid:{}", escape(v)),
        Stamp::At(t) => clock::iso(*t),
    }
}

fn stamp_json(s: &Stamp) -> Value {
    match s {
        Stamp::Missing => Value::Null,
        Stamp::Bad(v) => Value::String(v.clone()),
        Stamp::At(t) => Value::String(clock::iso(*t)),
    }
}

fn state(c: Option<&Copy>) -> &'static str {
    c.map(|c| c.place.as_str()).unwrap_or("missing")
}

/// Text form: the message, its original(s), then one row per recipient.
pub fn text(r: &Receipts) -> String {
    let mut s = message_lines(r);
    s.push_str(&original_lines(r));
    s.push('\n');
    s.push_str(&table(&rows(r)));
    s
}

/// The message's headers; only files the journal does not vouch for name
/// them, marked as not shown as said.
fn message_lines(r: &Receipts) -> String {
    let opt = |v: &Option<String>| escape(v.as_deref().unwrap_or("-"));
    let claim = |v: &Option<String>| {
        if r.claimed {
            format!("unverified (the files say '{}')", opt(v))
        } else {
            opt(v)
        }
    };
    let mut s = format!(
        "id: {}\nfrom: {}\nto: {}\ntype: {}\ncreated_at: {}\n",
        escape(&r.id),
        claim(&r.from),
        claim(&r.to),
        opt(&r.kind),
        opt(&r.created_at)
    );
    for (p, why) in &r.unverified {
        s.push_str(&format!(
            "unverified: {}: {}\n",
            escape(&p.display().to_string()),
            escape(why)
        ));
    }
    s
}

/// Where the original is (each, should there be more), and a refusal's reason.
fn original_lines(r: &Receipts) -> String {
    let mut s = String::new();
    if r.originals.is_empty() {
        s.push_str("original: missing\n");
    }
    for o in &r.originals {
        s.push_str(&format!(
            "original: {}{} {}\n",
            o.place.as_str(),
            if doubted(r, &o.path) {
                " (unverified)"
            } else {
                ""
            },
            escape(&o.path.display().to_string())
        ));
        if o.place == Place::Failed {
            s.push_str(&format!(
                "reason: {}\n",
                escape(o.reason.as_deref().unwrap_or("unknown (no .error note)"))
            ));
        }
    }
    s
}

const HEAD: [&str; 6] = [
    Header::Recipient.as_str(),
    "state",
    Header::EnqueuedAt.as_str(),
    Header::DequeuedAt.as_str(),
    Header::CompletedAt.as_str(),
    "path",
];

/// One row per recipient: its copy's state, stamps and path.
fn rows(r: &Receipts) -> Vec<[String; 6]> {
    r.receipts
        .iter()
        .map(|x| {
            let c = x.copy;
            let st =
                |f: fn(&Copy) -> &Stamp| c.map(|c| stamp_text(f(c), "-")).unwrap_or("-".into());
            let mut role = escape(&x.role);
            if !x.addressed {
                role.push_str(if cc_copy(x) { " (cc)" } else { " (not in to)" });
            }
            if let Some(o) = &x.shared_with {
                role.push_str(&format!(" (shared inbox, copy for {})", escape(o)));
            }
            let mut st_text = state(c).to_string();
            if c.is_some_and(|c| doubted(r, &c.path)) {
                st_text.push_str(" (unverified)");
            }
            [
                role,
                st_text,
                st(|c| &c.enqueued),
                st(|c| &c.dequeued),
                st(|c| &c.completed),
                c.map(|c| escape(&c.path.display().to_string()))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

/// The rows under [`HEAD`], each column as wide as its widest cell (the
/// last one unpadded).
fn table(rows: &[[String; 6]]) -> String {
    let mut width = HEAD.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  ", w = width[i]));
            }
        }
        l.push('\n');
        l
    };
    let mut s = line(&HEAD);
    for row in rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        s.push_str(&line(&cells));
    }
    s
}

/// JSON form: the same facts, one object.
pub fn json(r: &Receipts) -> Value {
    let originals: Vec<Value> = r
        .originals
        .iter()
        .map(|o| {
            json!({
                "state": o.place.as_str(),
                "verified": !doubted(r, &o.path),
                "path": o.path.display().to_string(),
                "reason": o.reason,
            })
        })
        .collect();
    let recipients: Vec<Value> = r
        .receipts
        .iter()
        .map(|x| {
            let c = x.copy;
            let st = |f: fn(&Copy) -> &Stamp| c.map(|c| stamp_json(f(c))).unwrap_or(Value::Null);
            json!({
                "recipient": x.role,
                "in_to": x.addressed,
                "cc": cc_copy(x),
                "shared_with": x.shared_with,
                "state": state(c),
                "verified": c.map(|c| !doubted(r, &c.path)),
                "enqueued_at": st(|c| &c.enqueued),
                "dequeued_at": st(|c| &c.dequeued),
                "completed_at": st(|c| &c.completed),
                "batch": c.and_then(|c| c.batch.clone()),
                "path": c.map(|c| c.path.display().to_string()),
            })
        })
        .collect();
    let unverified: Vec<Value> = r
        .unverified
        .iter()
        .map(|(p, why)| json!({"path": p.display().to_string(), "why": why}))
        .collect();
    // A sender only unverified files claim is no sender: `null`, and the
    // claim under its own name.
    let said = |v: &Option<String>| if r.claimed { None } else { v.clone() };
    json!({
        "id": r.id,
        "from": said(&r.from),
        "to": said(&r.to),
        "claimed_from": r.claimed.then(|| r.from.clone()).flatten(),
        "unverified": unverified,
        "type": r.kind,
        "created_at": r.created_at,
        "originals": originals,
        "recipients": recipients,
    })
}
