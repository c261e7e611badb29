//! What the agent asks of the client, and the answers: its requests
//! (a permission is a person's decision, [`super::permission`]; a file
//! system or a terminal is refused), what swarm.yaml pre-decides
//! ([`super::predecided`]) and a person's "always" ([`super::grants`]),
//! both looked at before anyone is asked, and `swarm cancel`.
//!
//! The invariant kept here: an answer reaches the agent only from a
//! person's decision, a grant a person made, the project's swarm.yaml, or
//! a refusal; never from anything the agent can write. An allow is put to
//! a person instead while the role is over its budget or its last tool
//! calls failed.

use super::*;
use crate::daemon::journal::Kind;
use crate::protocol::config::ToolDecision;
use predecided::{MAX_FAILED, SWARM_YAML};

impl Client<'_> {
    /// A request the agent makes of the client.
    pub(super) fn request(
        &mut self,
        id: Value,
        method: &str,
        params: &Value,
        say: &mut dyn FnMut(&str),
    ) -> Result<()> {
        if method != "session/request_permission" {
            if !self.said_fs {
                self.said_fs = true;
                self.rec.note(&format!(
                    "the agent asked the client for {}: refused (this client offers no files or terminals; the agent uses its own tools in its sandbox)",
                    permission::one_line(method, 80)
                ));
            }
            return self
                .conn
                .refuse(&id, rpc::METHOD_NOT_FOUND, "not offered by this client")
                .map_err(|e| self.io(e));
        }
        let reject = permission::reject_option(params);
        if params["sessionId"] == self.session.as_str()
            && self.predecided(&id, params, reject.as_deref(), say)?
        {
            return Ok(());
        }
        let asked = if params["sessionId"] != self.session.as_str() {
            Err(Error::bad_input("a permission request for another session"))
        } else if self.asked.len() >= MAX_ASKED {
            Err(Error::conflict(format!(
                "{MAX_ASKED} permission requests already wait for a person"
            )))
        } else {
            permission::ask(self.plan, self.role(), id.clone(), params)
        };
        match asked {
            Ok(a) => {
                let line = format!(
                    "asked {} for permission (clarify {}): {}",
                    a.person, a.clarify, a.question
                );
                say(&format!("{}: {line}", self.role()));
                self.rec.note(&line);
                self.asked.push((a, reject));
            }
            Err(e) => {
                let why = format!("permission request refused: {e}");
                say(&format!("{}: {why}", self.role()));
                self.rec.note(&why);
                let out = match reject {
                    Some(r) => json!({"outcome": {"outcome": "selected", "optionId": r}}),
                    None => json!({"outcome": {"outcome": "cancelled"}}),
                };
                self.conn.respond(&id, out).map_err(|e| self.io(e))?;
            }
        }
        Ok(())
    }

    /// Answers request `id` as swarm.yaml's `permissions:` decide for its
    /// tool, else from a person's "always" ([`Client::allowed_always`]).
    /// False: a person decides.
    fn predecided(
        &mut self,
        id: &Value,
        params: &Value,
        reject: Option<&str>,
        say: &mut dyn FnMut(&str),
    ) -> Result<bool> {
        let Some((kind, title)) = grants::tool_of(params) else {
            return Ok(false);
        };
        let tool = format!("{kind}: {title}");
        let (decision, pattern) = match self.rules.decide(&kind, &title) {
            Some((d, p)) => (d, format!("`{p}`")),
            None => return self.allowed_always(id, params, say),
        };
        let option = match decision {
            ToolDecision::Ask => return Ok(false),
            ToolDecision::Deny => reject.map(str::to_string),
            ToolDecision::Allow => {
                let how = format!("as swarm.yaml allows {pattern}");
                let option = permission::option_of(params, &["allow_once", "allow_always"]);
                if option.is_none() || self.allow_held(SWARM_YAML, None, &how, &tool, say) {
                    return Ok(false);
                }
                option
            }
        };
        let (kind, line) = match decision {
            ToolDecision::Deny => (
                Kind::PermissionDenied,
                format!("rejected without asking, as swarm.yaml denies {pattern}: {tool}"),
            ),
            _ => (
                Kind::PermissionAllowed,
                format!("allowed without asking, as swarm.yaml allows {pattern}: {tool}"),
            ),
        };
        say(&format!("{}: {line}", self.role()));
        self.rec.note(&line);
        predecided::journal(
            &self.plan.project,
            kind,
            self.role(),
            SWARM_YAML,
            None,
            line,
        );
        let out = match option {
            Some(o) => json!({"outcome": {"outcome": "selected", "optionId": o}}),
            None => json!({"outcome": {"outcome": "cancelled"}}),
        };
        self.conn.respond(id, out).map_err(|e| self.io(e))?;
        Ok(true)
    }

    /// Why an allow goes to a person now: the role (or the swarm) is over
    /// its budget, or the role's last [`MAX_FAILED`] tool calls failed.
    fn hold_reason(&self) -> Option<String> {
        if let Some(r) = crate::telemetry::budget::parked(&self.plan.project, self.role()) {
            return Some(format!("over budget: {}", r.words()));
        }
        let failed = self.rec.failed_in_a_row;
        (failed >= MAX_FAILED).then(|| format!("its last {failed} tool calls failed"))
    }

    /// True when the allow `how` (by `from`, from clarify `clarify`) of
    /// `tool` is put to a person instead; said, noted and journaled why.
    fn allow_held(
        &mut self,
        from: &str,
        clarify: Option<&str>,
        how: &str,
        tool: &str,
        say: &mut dyn FnMut(&str),
    ) -> bool {
        let Some(why) = self.hold_reason() else {
            return false;
        };
        let line = format!("asking a person instead of allowing {how} ({why}): {tool}");
        say(&format!("{}: {line}", self.role()));
        self.rec.note(&line);
        let project = &self.plan.project;
        predecided::journal(
            project,
            Kind::PermissionHeld,
            self.role(),
            from,
            clarify,
            line,
        );
        true
    }

    /// Answers request `id` from a person's earlier "always" for its tool
    /// (launch/acp/grants.rs), if there is one: the agent's "once" option
    /// (else its "always"), noted and journaled. False: a person decides.
    fn allowed_always(
        &mut self,
        id: &Value,
        params: &Value,
        say: &mut dyn FnMut(&str),
    ) -> Result<bool> {
        let Some((kind, title)) = grants::tool_of(params) else {
            return Ok(false);
        };
        let project = &self.plan.project;
        let grant = match grants::find(project, self.role(), &kind, &title) {
            Ok(g) => g,
            Err(e) => {
                self.rec.note(&format!("asking a person: {e}"));
                None
            }
        };
        let (Some(g), Some(option)) = (
            grant,
            permission::option_of(params, &["allow_once", "allow_always"]),
        ) else {
            return Ok(false);
        };
        let how = format!("as {} allowed always", g.by);
        let tool = format!("{kind}: {title}");
        if self.allow_held(&g.by, Some(&g.clarify), &how, &tool, say) {
            return Ok(false);
        }
        let line = format!(
            "allowed without asking, as {} allowed always at {} (clarify {}): {kind}: {title}",
            g.by, g.at, g.clarify
        );
        say(&format!("{}: {line}", self.role()));
        self.rec.note(&line);
        grants::used(project, &g);
        self.conn
            .respond(
                id,
                json!({"outcome": {"outcome": "selected", "optionId": option}}),
            )
            .map_err(|e| self.io(e))?;
        Ok(true)
    }

    /// Remembers a person's "always" on `a` (chosen as option `choice`).
    fn remember(&mut self, a: &Asked, choice: usize, by: &str, say: &mut dyn FnMut(&str)) {
        if a.option_kinds.get(choice - 1).map(String::as_str) != Some("allow_always") {
            return;
        }
        let line = match &a.tool {
            None => "not remembered: the request names no tool title".to_string(),
            Some(tool) => {
                let g = grants::new_grant(self.role(), tool, by, &a.clarify);
                match grants::add(&self.plan.project, &g) {
                    Ok(true) => format!(
                        "remembered: {by} allows {} always {}: {} (`swarm permissions` lists it)",
                        self.role(),
                        tool.0,
                        tool.1
                    ),
                    Ok(false) => format!(
                        "not remembered: already allowed always, or {} grants kept",
                        grants::MAX_GRANTS
                    ),
                    Err(e) => format!("not remembered: {e}"),
                }
            }
        };
        say(&format!("{}: {line}", self.role()));
        self.rec.note(&line);
    }

    /// `swarm cancel` by `by`: `session/cancel` for the running turn (its
    /// permission requests answered `cancelled` and withdrawn from the
    /// person), and the answer the command waits for.
    pub(super) fn cancel(&mut self, by: &str, say: &mut dyn FnMut(&str)) -> Result<()> {
        let text = if self.prompt.is_some() {
            self.conn
                .notify("session/cancel", json!({"sessionId": self.session}))
                .map_err(|e| self.io(e))?;
            for (a, _) in std::mem::take(&mut self.asked) {
                self.conn
                    .respond(&a.request, json!({"outcome": {"outcome": "cancelled"}}))
                    .map_err(|e| self.io(e))?;
                if let Err(e) = permission::withdraw(self.plan, &a, "the turn was cancelled") {
                    say(&format!(
                        "{}: cannot withdraw {}: {e}",
                        self.role(),
                        a.clarify
                    ));
                }
            }
            self.cancelled_by = Some(by.to_string());
            format!(
                "{by} cancelled prompt {} of session {} (session/cancel sent); its item stays where it is",
                self.prompts, self.session
            )
        } else {
            format!("{by} asked to cancel, but no turn runs")
        };
        say(&format!("{}: {text}", self.role()));
        self.rec.note(&text);
        cancel::answer(&self.plan.project, self.role(), &text);
        Ok(())
    }

    /// The agent is gone: every request still waiting for a person is
    /// withdrawn, so no question is left that nobody would hear answered.
    pub(super) fn withdraw_all(&mut self, say: &mut dyn FnMut(&str)) {
        for (a, _) in std::mem::take(&mut self.asked) {
            let why = "the agent's session ended before the decision";
            match permission::withdraw(self.plan, &a, why) {
                Ok(()) => say(&format!("{}: withdrew {}: {why}", self.role(), a.clarify)),
                Err(e) => say(&format!(
                    "{}: cannot withdraw {}: {e}",
                    self.role(),
                    a.clarify
                )),
            }
        }
    }

    /// Hands each person's decision that arrived back to the agent.
    pub(super) fn decisions(&mut self, say: &mut dyn FnMut(&str)) -> Result<()> {
        let max = self.plan.config.limits.max_file_bytes;
        let mut i = 0;
        while i < self.asked.len() {
            let Some(d) = permission::answered(self.plan, &self.asked[i].0, max) else {
                i += 1;
                continue;
            };
            let (a, reject) = self.asked.remove(i);
            let line = match &d {
                Decision::Chosen { choice, by, .. } => format!(
                    "{by} decided {} (clarify {}): {}",
                    a.shown[choice - 1],
                    a.clarify,
                    a.question
                ),
                Decision::Tampered(why) => format!("permission rejected: {why}"),
            };
            say(&format!("{}: {line}", self.role()));
            self.rec.note(&line);
            if let Decision::Chosen { choice, by, .. } = &d {
                self.remember(&a, *choice, by, say);
            }
            let out = permission::outcome(&a, &d, reject.as_deref());
            self.conn.respond(&a.request, out).map_err(|e| self.io(e))?;
            if let Decision::Chosen { answer, .. } = &d {
                self.retire_answer(answer, say);
            }
        }
        Ok(())
    }

    /// Completes the answer's copy in this role's inbox: it was the
    /// client's to read, not the agent's. Left waiting, it is work the
    /// agent is prompted for (a model call each time) and would be handed
    /// an answer to a question it never asked.
    fn retire_answer(&self, id: &str, say: &mut dyn FnMut(&str)) {
        let wt = self.r.worktree();
        let inbox = crate::agent::queue::Inbox::new(&wt, self.plan.config.limits.max_file_bytes);
        if let Err(e) = inbox.with_lock(|i| i.complete_copy_locked(id)) {
            say(&format!(
                "{}: warning: the answer {id} stays in its inbox: {e}",
                self.role()
            ));
        }
    }
}
