//! What a confined agent's request and handoffd's answer say on disk: one
//! message each, parsed with the one header parser. A request names only
//! the fields of its operation (never a role: the role is the folder's),
//! and reading one checks it as the command line would, so what handoffd
//! carries out is what the confined command could have done itself.

use crate::error::Token;
use crate::protocol::grammar;
use crate::protocol::header::Message;
use crate::reservations;
use crate::text::escape;
/// What a confined agent asks handoffd to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    SessionStart {
        title: Option<String>,
    },
    SessionClose {
        id: Option<String>,
        reason: String,
    },
    DiscussionOpen {
        id: String,
        order: Vec<String>,
        max_turns: Option<u32>,
    },
    DiscussionClose {
        id: String,
        reason: String,
    },
    AuditCount {
        task: String,
    },
    /// `swarm reserve`, in the folder's role's name.
    Reserve {
        /// Normalised, one per line of the body.
        globs: Vec<String>,
        ttl_ms: u64,
        reason: String,
        force: bool,
    },
    /// `swarm release` of the folder's role's reservations (all of them
    /// when `globs` is empty).
    Release {
        globs: Vec<String>,
    },
}

/// The globs of a reservation request, one per line of its body.
fn globs_body(globs: &[String]) -> String {
    globs.iter().map(|g| format!("{g}\n")).collect()
}

/// Why a request is not one handoffd carries out; the text goes into the
/// answer as `malformed request: <text>`, so the confined command says it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    #[error("the globs do not end with a new line")]
    GlobsUnended,
    #[error("more than {} globs", reservations::MAX_GLOBS)]
    TooManyGlobs,
    #[error("{0}")]
    Glob(#[from] reservations::glob::BadGlob),
    #[error(
        "'{}' is not a field of this request (a request acts in the name of the folder it is in)",
        escape(.0)
    )]
    NotAField(String),
    #[error("request without '{0}'")]
    Missing(&'static str),
    #[error("max_turns is not a number")]
    MaxTurns,
    #[error("a reservation names no glob")]
    NoGlob,
    #[error("ttl_ms is not a number of milliseconds")]
    TtlNotANumber,
    #[error("ttl_ms must be more than 0 and at most 30d")]
    TtlRange,
    #[error("force is neither true nor false")]
    Force,
    #[error("unknown request '{}'", escape(.0))]
    Unknown(String),
}

/// The globs a request's body names, each one `reserve` could have stored.
fn globs_of(body: &str) -> std::result::Result<Vec<String>, BadRequest> {
    let Some(lines) = body.strip_suffix('\n') else {
        return if body.is_empty() {
            Ok(Vec::new())
        } else {
            Err(BadRequest::GlobsUnended)
        };
    };
    let globs: Vec<String> = lines.split('\n').map(str::to_string).collect();
    if globs.len() > reservations::MAX_GLOBS {
        return Err(BadRequest::TooManyGlobs);
    }
    for g in &globs {
        reservations::normalised_glob(g)?;
    }
    Ok(globs)
}

/// Refuses a field `m` has that its operation does not take (a role
/// above all: the role is the folder's).
fn only(m: &Message, fields: &[&str]) -> std::result::Result<(), BadRequest> {
    match m
        .headers
        .iter()
        .find(|(k, _)| !fields.contains(&k.as_str()))
    {
        Some((k, _)) => Err(BadRequest::NotAField(k.clone())),
        None => Ok(()),
    }
}

impl Ask {
    pub(super) fn to_message(&self) -> Message {
        let mut m = Message::default();
        let mut put = |k: &str, v: Option<&str>| {
            if let Some(v) = v {
                m.push_named(k, v);
            }
        };
        match self {
            Ask::SessionStart { title } => {
                put("op", Some("session_start"));
                put("title", title.as_deref());
            }
            Ask::SessionClose { id, reason } => {
                put("op", Some("session_close"));
                put("session", id.as_deref());
                put("reason", Some(reason));
            }
            Ask::DiscussionOpen {
                id,
                order,
                max_turns,
            } => {
                put("op", Some("discussion_open"));
                put("discussion", Some(id));
                put("order", Some(&order.join(",")));
                put("max_turns", max_turns.map(|n| n.to_string()).as_deref());
            }
            Ask::DiscussionClose { id, reason } => {
                put("op", Some("discussion_close"));
                put("discussion", Some(id));
                put("reason", Some(reason));
            }
            Ask::AuditCount { task } => {
                put("op", Some("audit_count"));
                put("task", Some(task));
            }
            Ask::Reserve {
                globs,
                ttl_ms,
                reason,
                force,
            } => {
                put("op", Some("reserve"));
                put("ttl_ms", Some(&ttl_ms.to_string()));
                put("reason", Some(reason));
                put("force", Some(if *force { "true" } else { "false" }));
                m.body = globs_body(globs);
            }
            Ask::Release { globs } => {
                put("op", Some("release"));
                m.body = globs_body(globs);
            }
        }
        m
    }

    pub(super) fn of(m: &Message) -> std::result::Result<Ask, BadRequest> {
        let get = |k: &str| m.get_named(k).map(str::to_string);
        let need = |k: &'static str| get(k).ok_or(BadRequest::Missing(k));
        Ok(match m.get_named("op").unwrap_or_default() {
            "session_start" => Ask::SessionStart {
                title: get("title"),
            },
            "session_close" => Ask::SessionClose {
                id: get("session"),
                reason: need("reason")?,
            },
            "discussion_open" => Ask::DiscussionOpen {
                id: need("discussion")?,
                order: grammar::role_list(Some(&need("order")?))
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                max_turns: match get("max_turns") {
                    None => None,
                    Some(n) => Some(n.parse().map_err(|_| BadRequest::MaxTurns)?),
                },
            },
            "discussion_close" => Ask::DiscussionClose {
                id: need("discussion")?,
                reason: need("reason")?,
            },
            "audit_count" => Ask::AuditCount {
                task: need("task")?,
            },
            "reserve" => {
                only(m, &["op", "ttl_ms", "reason", "force"])?;
                let globs = globs_of(&m.body)?;
                if globs.is_empty() {
                    return Err(BadRequest::NoGlob);
                }
                let ttl_ms: u64 = need("ttl_ms")?
                    .parse()
                    .map_err(|_| BadRequest::TtlNotANumber)?;
                if ttl_ms == 0 || u128::from(ttl_ms) > reservations::MAX_TTL.as_millis() {
                    return Err(BadRequest::TtlRange);
                }
                Ask::Reserve {
                    globs,
                    ttl_ms,
                    reason: need("reason")?,
                    force: match need("force")?.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(BadRequest::Force),
                    },
                }
            }
            "release" => {
                only(m, &["op"])?;
                Ask::Release {
                    globs: globs_of(&m.body)?,
                }
            }
            other => return Err(BadRequest::Unknown(other.to_string())),
        })
    }
}

/// handoffd's answer: the record made (a session or discussion id) and
/// what the command prints from (a reservation request's JSON), or why not
/// (with the refusal's token when the direct command's has one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Done {
        record: Option<String>,
        data: String,
    },
    Refused {
        why: String,
        token: Option<Token>,
    },
}

/// The refusal tokens an answer carries back (those of the reservation
/// requests): the confined command exits with the token's code.
pub(super) const ANSWERED_TOKENS: [Token; 2] = [Token::Reserved, Token::NotReserved];

impl Answer {
    pub(super) fn done(record: Option<String>) -> Answer {
        Answer::Done {
            record,
            data: String::new(),
        }
    }

    pub(super) fn to_message(&self) -> Message {
        let mut m = Message::default();
        match self {
            Answer::Done { record, data } => {
                m.push_named("outcome", "done");
                if let Some(id) = record {
                    m.push_named("record", id);
                }
                if !data.is_empty() {
                    m.body = format!("{data}\n");
                }
            }
            Answer::Refused { why, token } => {
                m.push_named("outcome", "refused");
                if let Some(t) = token {
                    m.push_named("token", t.name());
                }
                m.body = format!("{why}\n");
            }
        }
        m
    }

    pub(super) fn of(m: &Message) -> Option<Answer> {
        match m.get_named("outcome")? {
            "done" => Some(Answer::Done {
                record: m.get_named("record").map(str::to_string),
                data: m.body.trim_end().to_string(),
            }),
            "refused" => Some(Answer::Refused {
                why: m.body.trim_end().to_string(),
                token: match m.get_named("token") {
                    None => None,
                    Some(name) => Some(ANSWERED_TOKENS.into_iter().find(|t| t.name() == name)?),
                },
            }),
            _ => None,
        }
    }
}
