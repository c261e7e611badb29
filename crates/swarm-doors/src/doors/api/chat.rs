//! One OpenAI-compatible chat completion (`POST {base_url}/chat/completions`)
//! with a blocking client: timeouts, retries with backoff, a bounded and
//! validated answer. The key only ever goes in the Authorization header:
//! whatever comes back (an error text, a refusal, the answer itself) has it
//! replaced by `<redacted>` before it reaches a header, a file or stdout,
//! since a server or gateway may quote the request's headers
//! (docs/security.md, "Secrets").

use std::time::Duration;

use serde_json::{json, Value};

/// Largest response body read (a chat answer is a few KiB).
pub const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;
/// First pause before a retry; doubles per attempt.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Where and how to ask.
pub struct Endpoint {
    /// `{base_url}/chat/completions`.
    pub url: String,
    pub model: String,
    /// Read from the environment at start; never printed (see `Debug`).
    key: Option<String>,
    pub timeout: Duration,
    pub retries: u32,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Why a call gave no answer: one line, ready for `done-current --failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

/// One attempt's outcome: retry it or not.
enum Attempt {
    Retry(String),
    Final(Failure),
}

impl Endpoint {
    pub fn new(
        base_url: &str,
        model: &str,
        key: Option<String>,
        timeout: Duration,
        retries: u32,
    ) -> Endpoint {
        Endpoint {
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: model.to_string(),
            key: key.filter(|k| !k.is_empty()),
            timeout,
            retries,
        }
    }

    /// Asks once (plus `retries` more times on transient failures) and
    /// returns the answer text.
    /// `spent` gets the usage of every answer that reported one (a refused
    /// or unusable answer's tokens were spent too).
    pub fn complete(
        &self,
        system: &str,
        user: &str,
        say: &mut dyn FnMut(&str),
        spent: &mut dyn FnMut(Spent),
    ) -> Result<String, Failure> {
        let body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "stream": false,
        })
        .to_string();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            // A redirect could carry the Authorization header elsewhere.
            .max_redirects(0)
            .user_agent("swarm-handoff run-api")
            .build()
            .into();
        let mut pause = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            let outcome = match self.attempt(&agent, &body, spent) {
                Ok(text) => Ok(self.redact(&text)),
                Err(Attempt::Final(f)) => Err(Attempt::Final(Failure(self.redact(&f.0)))),
                Err(Attempt::Retry(why)) => Err(Attempt::Retry(self.redact(&why))),
            };
            match outcome {
                Ok(text) => return Ok(text),
                Err(Attempt::Final(f)) => return Err(f),
                Err(Attempt::Retry(why)) if attempt >= self.retries => {
                    return Err(Failure(if self.retries == 0 {
                        why
                    } else {
                        format!("{why} (after {} attempts)", attempt + 1)
                    }))
                }
                Err(Attempt::Retry(why)) => {
                    attempt += 1;
                    say(&format!("{why}; retrying in {} ms", pause.as_millis()));
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// `text` with every occurrence of the key replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(k) if text.contains(k.as_str()) => text.replace(k.as_str(), "<redacted>"),
            _ => text.to_string(),
        }
    }

    fn attempt(
        &self,
        agent: &ureq::Agent,
        body: &str,
        spent: &mut dyn FnMut(Spent),
    ) -> Result<String, Attempt> {
        let (status, text) = self.post(agent, body)?;
        self.judge(status, &text)?;
        if let Some(s) = parse_usage(&text) {
            spent(s);
        }
        parse_answer(&text).map_err(|why| Attempt::Final(Failure(why.to_string())))
    }

    /// Posts `body` and reads the answer (at most [`MAX_RESPONSE_BYTES`]),
    /// the key redacted from it before anything is cut to one line (a cut
    /// key would not match): its HTTP status and text.
    fn post(&self, agent: &ureq::Agent, body: &str) -> Result<(u16, String), Attempt> {
        let mut req = agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(k) = &self.key {
            req = req.header("Authorization", format!("Bearer {k}"));
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => return Err(self.timed_out()),
            Err(e) => {
                return Err(Attempt::Retry(format!(
                    "cannot reach {}: {}",
                    self.url,
                    one_line(&self.redact(&e.to_string()))
                )))
            }
        };
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_string();
        match text {
            Ok(t) => Ok((status, self.redact(&t))),
            Err(ureq::Error::Timeout(_)) => Err(self.timed_out()),
            Err(ureq::Error::BodyExceedsLimit(_)) => Err(Attempt::Final(Failure(format!(
                "the answer from {} is larger than {MAX_RESPONSE_BYTES} bytes",
                self.url
            )))),
            Err(e) => Err(Attempt::Retry(format!(
                "reading the answer from {}: {}",
                self.url,
                one_line(&self.redact(&e.to_string()))
            ))),
        }
    }

    /// No answer within the timeout: tried again.
    fn timed_out(&self) -> Attempt {
        Attempt::Retry(format!(
            "no answer from {} within {} s",
            self.url,
            self.timeout.as_secs_f64()
        ))
    }

    /// What an HTTP status says: 429 and 5xx are tried again, any other
    /// status but 2xx is final (with a hint for a refused key).
    fn judge(&self, status: u16, text: &str) -> Result<(), Attempt> {
        if status == 429 || status >= 500 {
            return Err(Attempt::Retry(format!(
                "{} answered HTTP {status}{}",
                self.url,
                server_says(text)
            )));
        }
        if !(200..300).contains(&status) {
            let hint = if status == 401 || status == 403 {
                " (check the key in the role's api_key_env)"
            } else {
                ""
            };
            return Err(Attempt::Final(Failure(format!(
                "{} answered HTTP {status}{}{hint}",
                self.url,
                server_says(text)
            ))));
        }
        Ok(())
    }
}

/// What one answer says it used (OpenAI's `usage` object): `prompt_tokens`
/// counts the cached ones too, so they are split off as cache reads;
/// `cost` is kept when a gateway reports it (OpenRouter does).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spent {
    pub model: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cost_usd: Option<f64>,
}

/// The `usage` of a chat-completion response, when it has one.
pub fn parse_usage(text: &str) -> Option<Spent> {
    let v: Value = serde_json::from_str(text).ok()?;
    let u = v.get("usage")?.as_object()?;
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = u
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let prompt = n("prompt_tokens");
    let model = v
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| m.len() <= 200 && !m.chars().any(char::is_control))
        .map(str::to_string);
    Some(Spent {
        model,
        input_tokens: prompt.saturating_sub(cached),
        output_tokens: n("completion_tokens"),
        cache_read_tokens: cached.min(prompt),
        cost_usd: u
            .get("cost")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0),
    })
}

/// Why a chat-completion response carries no answer (the texts are the
/// item's failure reason).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoAnswer {
    #[error("malformed answer (not JSON: {0})")]
    NotJson(String),
    #[error("malformed answer (no choices[0])")]
    NoChoice,
    #[error("malformed answer (no choices[0].message)")]
    NoMessage,
    #[error("the model refused: {0}")]
    Refused(String),
    #[error("the model refused (finish_reason content_filter)")]
    Filtered,
    #[error("malformed answer (choices[0].message.content is not a string)")]
    NotText,
    #[error("the model's answer was empty")]
    Empty,
}

/// The answer text of a chat-completion response, or why there is none.
pub fn parse_answer(text: &str) -> Result<String, NoAnswer> {
    let v: Value = serde_json::from_str(text).map_err(|e| NoAnswer::NotJson(e.to_string()))?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or(NoAnswer::NoChoice)?;
    let msg = choice.get("message").ok_or(NoAnswer::NoMessage)?;
    if let Some(r) = msg
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|r| !r.trim().is_empty())
    {
        return Err(NoAnswer::Refused(one_line(r)));
    }
    if choice.get("finish_reason").and_then(Value::as_str) == Some("content_filter") {
        return Err(NoAnswer::Filtered);
    }
    let content = msg
        .get("content")
        .and_then(Value::as_str)
        .ok_or(NoAnswer::NotText)?;
    if content.trim().is_empty() {
        return Err(NoAnswer::Empty);
    }
    Ok(content.to_string())
}

/// The server's error message, when it sent the usual `{"error": {...}}`.
fn server_says(text: &str) -> String {
    let v: Option<Value> = serde_json::from_str(text).ok();
    let msg = v.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
    });
    match msg {
        Some(m) => format!(": {}", one_line(m)),
        None => String::new(),
    }
}

/// One escaped line of at most 160 characters.
pub fn one_line(s: &str) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let esc = crate::text::escape(&flat);
    let mut cut: String = esc.chars().take(160).collect();
    if cut.len() < esc.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_validated() {
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        assert_eq!(parse_answer(ok).unwrap(), "hi");
        assert!(parse_answer("{")
            .unwrap_err()
            .to_string()
            .contains("not JSON"));
        assert!(parse_answer(r#"{"choices":[]}"#)
            .unwrap_err()
            .to_string()
            .contains("choices[0]"));
        let refused = r#"{"choices":[{"message":{"content":null,"refusal":"I can't help"}}]}"#;
        assert_eq!(
            parse_answer(refused).unwrap_err().to_string(),
            "the model refused: I can't help"
        );
        let filtered =
            r#"{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}"#;
        assert_eq!(parse_answer(filtered), Err(NoAnswer::Filtered));
    }

    #[test]
    fn usage_is_read_with_cached_prompt_tokens_split_off() {
        let t = r#"{"model":"m","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":40},"cost":0.5}}"#;
        let s = parse_usage(t).unwrap();
        assert_eq!(
            (s.input_tokens, s.output_tokens, s.cache_read_tokens),
            (60, 7, 40)
        );
        assert_eq!((s.model.as_deref(), s.cost_usd), (Some("m"), Some(0.5)));
        assert_eq!(parse_usage(r#"{"choices":[]}"#), None);
        let bad = r#"{"usage":{"prompt_tokens":-5,"completion_tokens":"x","cost":-1}}"#;
        assert_eq!(parse_usage(bad).unwrap(), Spent::default());
    }

    #[test]
    fn the_key_is_never_in_debug_output() {
        let e = Endpoint::new(
            "http://h/v1/",
            "m",
            Some("sk-secret".into()),
            Duration::from_secs(1),
            0,
        );
        assert_eq!(e.url, "http://h/v1/chat/completions");
        assert!(!format!("{e:?}").contains("sk-secret"));
    }
}
