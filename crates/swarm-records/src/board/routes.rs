//! Where a card goes: each card type's ordered route, each role's
//! propagation token, and the window order that names a card's terminal
//! recipients (docs/swarmforge-compat.md §4).
//!
//! Read as `swarm up` reads the swarm: the roles (and their `propagation:`)
//! from `swarm.yaml` when it lists any, else from SwarmForge's
//! `swarmforge/swarmforge.conf` (the `window` lines' propagation token); the
//! cards from `swarm.yaml`'s `cards:` when it declares any, else from the
//! conf's `card` lines. Window order is roles.tsv order, which both write in
//! config order.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::protocol::config::{Config, Propagation, MAX_CONFIG_BYTES};
use crate::protocol::layout::Project;
use crate::protocol::roles::Roles;
use crate::protocol::swarm::Swarm;
use crate::protocol::swarmforge_conf::{self, ConfPaths};

/// Longest card type name.
const MAX_KIND: usize = 64;

/// The routes of one project.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    /// Card type → its route, first role first.
    pub cards: BTreeMap<String, Vec<String>>,
    /// Roles whose propagation is not `forward-only`.
    pub propagation: BTreeMap<String, Propagation>,
    /// Every role, in window (roles.tsv) order.
    pub window: Vec<String>,
    /// The file the cards were read from.
    pub source: PathBuf,
}

impl Routes {
    /// The project's routes; none (empty) when neither file declares a card.
    pub fn load(project: &Project) -> Result<Routes> {
        Routes::load_in(&Swarm::new(project.clone()))
    }

    /// [`Routes::load`] in a loaded swarm.
    pub fn load_in(swarm: &Swarm) -> Result<Routes> {
        let roles = swarm.roles()?;
        let config = swarm.config()?;
        Routes::from_parts(&swarm.project, roles, config)
    }

    /// [`Routes::load`] with roles.tsv and swarm.yaml already read.
    pub fn from_parts(project: &Project, roles: &Roles, config: &Config) -> Result<Routes> {
        let window: Vec<String> = roles.roles.iter().map(|r| r.name.clone()).collect();
        let yaml_prop =
            |roles: &[crate::protocol::config::RoleConfig]| -> BTreeMap<String, Propagation> {
                roles
                    .iter()
                    .filter(|r| r.propagation != Propagation::ForwardOnly)
                    .map(|r| (r.name.clone(), r.propagation))
                    .collect()
            };
        let conf = project.swarmforge_conf();
        // The roles come from swarm.yaml when it lists any (as for `swarm
        // up`), else from the conf; the cards from swarm.yaml when it
        // declares any, else from the conf.
        let (cards, propagation, source) = if !config.roles.is_empty() || !conf.exists() {
            (
                config.cards.clone(),
                yaml_prop(&config.roles),
                project.config_file(),
            )
        } else {
            let bytes = crate::fsx::read_bounded(&conf, MAX_CONFIG_BYTES)
                .map_err(|e| Error::bad_file(&conf, e))?;
            let text = String::from_utf8_lossy(&bytes);
            // Agents and prompts are `swarm up`'s business; only the routes
            // and tokens are read here.
            let c = swarmforge_conf::parse(
                &text,
                &ConfPaths::for_root(&project.root),
                &|_: &str| true,
                &|_: &std::path::Path| true,
            )?;
            let prop = c
                .roles
                .iter()
                .filter(|r| r.propagation != Propagation::ForwardOnly)
                .map(|r| (r.name.clone(), r.propagation))
                .collect();
            if config.cards.is_empty() {
                let cards = c.cards.into_iter().map(|k| (k.kind, k.route)).collect();
                (cards, prop, conf)
            } else {
                (config.cards.clone(), prop, project.config_file())
            }
        };
        let routes = Routes {
            cards,
            propagation,
            window,
            source,
        };
        routes.check()?;
        Ok(routes)
    }

    fn check(&self) -> Result<()> {
        check_cards(&self.cards, &self.window, &self.source)
    }

    /// The routes of the project a helper runs in, when it declares cards;
    /// a conf that cannot be read shows no card lines (`swarm status` and
    /// `swarm doctor` say why).
    pub fn for_place(project: Option<&Project>) -> Option<Routes> {
        Routes::load(project?).ok().filter(|r| !r.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.cards.is_empty()
    }

    pub fn route(&self, kind: &str) -> Option<&[String]> {
        self.cards.get(kind).map(Vec::as_slice)
    }

    /// The roles before `last` in window order: the recipients of a card's
    /// terminal handoff (upstream: "Window order—not route order—determines
    /// which earlier roles receive a terminal result").
    pub fn terminal_set(&self, last: &str) -> Vec<&str> {
        self.window
            .iter()
            .take_while(|r| *r != last)
            .map(String::as_str)
            .collect()
    }

    /// Whether `from` sending to `to` is the card's terminal handoff: the
    /// last role of the route, to exactly its terminal set.
    pub fn is_terminal(&self, route: &[String], from: &str, to: &[&str]) -> bool {
        if route.last().map(String::as_str) != Some(from) {
            return false;
        }
        let mut want = self.terminal_set(from);
        let mut got = to.to_vec();
        want.sort_unstable();
        got.sort_unstable();
        got.dedup();
        !want.is_empty() && want == got
    }

    /// The merge-only copies a forward `git_handoff` from `from` to `to`
    /// makes: with `back-one` the role before `from`, with `back-all` every
    /// role before it, on the card's route (the `lieutenant` README: "on this
    /// card's configured route"); for a task that is no card (in a project
    /// without cards: where there are cards such a send is refused), in
    /// window order (as upstream's `swarm_handoff.bb` does). Never a role already
    /// addressed, never for the terminal handoff.
    pub fn copy_targets(&self, route: Option<&[String]>, from: &str, to: &[&str]) -> Vec<String> {
        let p = self
            .propagation
            .get(from)
            .copied()
            .unwrap_or(Propagation::ForwardOnly);
        if p == Propagation::ForwardOnly {
            return Vec::new();
        }
        if route.is_some_and(|r| self.is_terminal(r, from, to)) {
            return Vec::new();
        }
        let order: Vec<&str> = match route {
            Some(r) => r.iter().map(String::as_str).collect(),
            None => self.window.iter().map(String::as_str).collect(),
        };
        let Some(at) = order.iter().position(|r| *r == from) else {
            return Vec::new();
        };
        let earlier = &order[..at];
        let picked: &[&str] = match p {
            Propagation::BackOne => &earlier[earlier.len().saturating_sub(1)..],
            _ => earlier,
        };
        picked
            .iter()
            .filter(|r| !to.contains(r))
            .map(|r| r.to_string())
            .collect()
    }
}

/// Upstream's rule for a route ("nonempty, no duplicate roles, only roles
/// defined by window lines"), against `roles`, and a type name that fits a
/// header; errors name `source`. `swarm init` / `swarm up` check swarm.yaml's
/// `cards:` with it (swarmforge.conf's `card` lines are checked as upstream
/// words it, in protocol/swarmforge_conf.rs).
pub fn check_cards(
    cards: &BTreeMap<String, Vec<String>>,
    roles: &[String],
    source: &std::path::Path,
) -> Result<()> {
    let at = source.display();
    for (kind, route) in cards {
        if kind.is_empty()
            || kind.len() > MAX_KIND
            || !kind
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(Error::bad_input(format!(
                "{at}: card type '{}' is not a name (letters, digits, '-', '_', '.'; at most {MAX_KIND})",
                crate::text::escape(kind)
            )));
        }
        if route.is_empty() {
            return Err(Error::bad_input(format!(
                "{at}: card '{kind}' has an empty route; list its roles in order"
            )));
        }
        for (i, role) in route.iter().enumerate() {
            if !roles.contains(role) {
                return Err(Error::bad_input(format!(
                    "{at}: card '{kind}': role '{}' is not a role of this swarm",
                    crate::text::escape(role)
                )));
            }
            if route[..i].contains(role) {
                return Err(Error::bad_input(format!(
                    "{at}: card '{kind}': role '{role}' appears twice in its route"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(prop: &[(&str, Propagation)]) -> Routes {
        let mut cards = BTreeMap::new();
        cards.insert(
            "change".to_string(),
            vec!["lead".into(), "implement".into(), "verify".into()],
        );
        Routes {
            cards,
            propagation: prop.iter().map(|(r, p)| (r.to_string(), *p)).collect(),
            window: vec![
                "lead".into(),
                "docs".into(),
                "implement".into(),
                "verify".into(),
            ],
            source: PathBuf::from("swarm.yaml"),
        }
    }

    #[test]
    fn terminal_is_the_last_role_to_every_earlier_window_role() {
        let r = routes(&[]);
        let route = r.route("change").unwrap().to_vec();
        assert!(r.is_terminal(&route, "verify", &["implement", "lead", "docs"]));
        assert!(!r.is_terminal(&route, "verify", &["lead", "implement"]));
        assert!(!r.is_terminal(&route, "implement", &["lead", "docs"]));
    }

    #[test]
    fn copies_go_back_on_the_route_and_never_with_the_terminal() {
        let r = routes(&[
            ("implement", Propagation::BackOne),
            ("verify", Propagation::BackAll),
        ]);
        let route = r.route("change").unwrap().to_vec();
        assert_eq!(
            r.copy_targets(Some(&route), "implement", &["verify"]),
            ["lead"]
        );
        assert!(r
            .copy_targets(Some(&route), "verify", &["lead", "docs", "implement"])
            .is_empty());
        // A handback from verify to implement: a forward of sorts; lead gets a copy.
        assert_eq!(
            r.copy_targets(Some(&route), "verify", &["implement"]),
            ["lead"]
        );
        // No card: window order.
        assert_eq!(r.copy_targets(None, "implement", &["verify"]), ["docs"]);
        assert!(r
            .copy_targets(Some(&route), "lead", &["implement"])
            .is_empty());
    }
}
