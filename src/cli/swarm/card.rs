//! `swarm card new <type> <name>` and `swarm card list`: today's SwarmForge's
//! New Task and board (docs/swarmforge-compat.md §4; crates/swarm-records/src/board/).

use std::path::PathBuf;

use crate::error::Error;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Start a card of a declared type: its first role gets the task
    #[command(after_help = "\
The type is one of the project's `card <type> <role>...` lines \
(swarmforge/swarmforge.conf) or `cards:` entries (swarm.yaml). The task text \
(--text, --file, or - for stdin) is kept in .swarmforge/board/<name>.txt and \
sent as a note from handoffd to the first role of the route, with headers \
`task: <name>` and `card_type: <type>`; the card is in lane `new` until \
handoffd delivers it, then in that role's lane. git_handoffs naming the card \
in `task` move it along the route; the last role's terminal handoff (to every \
role before it in roles.tsv order) moves it to `done`.
Only a person starts a card (docs/security.md).
Exit 0 queued; 1 unknown type, bad name or text, or an environment error; 2 \
CARD_EXISTS (a card of that name is on the board), PERSON_ONLY (run by an \
agent).")]
    New {
        /// The card type (its route comes from the config)
        #[arg(value_name = "TYPE")]
        kind: String,
        /// The card's name: letters, digits, '.', '_', '-'
        name: String,
        /// The task text
        #[arg(long, conflicts_with = "file")]
        text: Option<String>,
        /// Read the task text from this file (- for stdin)
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Project root or any folder inside it (default: the current directory)
        #[arg(long = "root", value_name = "ROOT")]
        root: Option<PathBuf>,
        /// Print one JSON object instead of text
        #[arg(long)]
        json: bool,
    },
    /// Every card and its lane, as the handoffs say
    #[command(after_help = "\
Prints `<name> (<type>) <lane>` per card, and says where \
.swarmforge/board/tasks.tsv is not in step with the handoffs. Exit 0; 1 when \
the project declares no card type or on an environment error.")]
    List {
        /// Project root or any folder inside it (default: the current
        /// directory; `--root DIR` is the same)
        #[arg(id = "root_dir", value_name = "ROOT")]
        root: Option<PathBuf>,
        /// Print one JSON object instead of text
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> i32 {
    match args.command {
        Sub::New {
            kind,
            name,
            text,
            file,
            root,
            json,
        } => super::answer(
            root.as_deref(),
            json,
            |p| {
                let text = match (text, file) {
                    (Some(t), _) => t,
                    (None, Some(f)) if f.as_os_str() == "-" => {
                        let mut s = String::new();
                        std::io::Read::read_to_string(
                            &mut std::io::Read::take(
                                std::io::stdin(),
                                crate::board::MAX_TEXT as u64 + 1,
                            ),
                            &mut s,
                        )
                        .map_err(|e| Error::io("stdin", e))?;
                        s
                    }
                    (None, Some(f)) => {
                        let b = crate::fsx::read_bounded(&f, crate::board::MAX_TEXT as u64)
                            .map_err(|e| Error::bad_file(&f, e))?;
                        String::from_utf8(b).map_err(|_| Error::bad_file(&f, "not valid UTF-8"))?
                    }
                    (None, None) => String::new(),
                };
                if let Some(role) = crate::forum::requests::confined_role() {
                    return Err(crate::board::refused_to_confined(p, &role, &kind, &name));
                }
                // Starting work on the board is a person's act (upstream's
                // New Task button; docs/security.md), confined or not.
                crate::agent::caller::Caller::of(p)?.require_person("swarm card new")?;
                crate::board::new_card(p, &kind, &name, &text)
            },
            |c| serde_json::json!({"status": "queued", "card": c}),
            |c| {
                format!(
                    "CARD QUEUED: {} ({}) for {}: {}\n",
                    c.name,
                    c.kind,
                    c.first,
                    c.queued.display()
                )
            },
        ),
        Sub::List { root, json } => super::answer(
            root.as_deref(),
            json,
            |p| {
                crate::board::view(p)?.ok_or_else(|| {
                    Error::not_found(format!(
                        "{} declares no card type: add `card <type> <role>...` to {} or `cards:` to {}",
                        p.root.display(),
                        p.swarmforge_conf().display(),
                        p.config_file().display()
                    ))
                })
            },
            |v| serde_json::to_value(v).unwrap_or_default(),
            crate::board::text,
        ),
    }
}
