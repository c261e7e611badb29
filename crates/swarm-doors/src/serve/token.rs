//! The cockpit's access token and the guard every request passes.
//!
//! 32 random bytes from the kernel (getrandom(2)), hex, written to
//! `.swarmforge/serve/token` with mode 0600 from its first byte, and printed
//! in the URL. The page's first load (`/?token=`) exchanges it for an
//! HttpOnly, SameSite=Strict cookie named for this port and is redirected
//! to `/`, so the token leaves the address bar and history and no later
//! request carries it in a URL (docs/cockpit.md, "Security"). Every request
//! must carry it: the cookie, the `X-Swarm-Token` header, an `Authorization`
//! header (`Bearer <token>`, or `Basic` with the token as the password: what
//! an HTTP client makes of a base URL `http://swarm:<token>@host:port`, the
//! only way a tool built for SwarmForge's dashboard can be given it), or (a
//! GET from a script) `?token=`. A POST must carry it in the cookie or the header,
//! never the query; with the cookie it must come from this origin (an
//! `Origin` naming this server, JSON only), and any POST whose `Origin` or
//! `Sec-Fetch-Site` names another site gets 403. The `Host` header must name this server by
//! address (`127.0.0.1:<port>`, `[::1]:<port>`, `localhost:<port>`): a
//! page whose own host name resolves to 127.0.0.1 (DNS rebinding) is
//! refused before the token is even looked at.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{Error, Result};
use crate::fsx;
use crate::protocol::layout::Project;

use super::App;

pub const HEADER: &str = "x-swarm-token";

/// The cookie's name: cookies are not kept apart by port, so two cockpits
/// on one host must not share one.
pub fn cookie_name(port: u16) -> String {
    format!("swarm_cockpit_{port}")
}

/// The `Set-Cookie` value that replaces the URL's token.
pub fn set_cookie(port: u16, token: &str) -> String {
    format!(
        "{}={token}; Path=/; HttpOnly; SameSite=Strict",
        cookie_name(port)
    )
}

fn cookie_token<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(name)?.strip_prefix('='))
}

/// A fresh token, saved for the people allowed to read the project.
pub fn create(project: &Project) -> Result<String> {
    let token = crate::sys::random::hex_token().map_err(|e| Error::io("getrandom", e))?;
    let dir = project.serve_dir();
    fsx::ensure_dirs(&[&dir]).map_err(|e| Error::io(&dir, e))?;
    fsx::set_mode(&dir, 0o700).map_err(|e| Error::io(&dir, e))?;
    let file = project.serve_token();
    fsx::write_private(&dir, &file, format!("{token}\n").as_bytes())
        .map_err(|e| Error::io(&file, e))?;
    Ok(token)
}

pub use crate::text::same_secret as same;

pub fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

fn header_str(h: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The token an `Authorization` header carries: `Bearer <token>`, or
/// `Basic` credentials whose password is the token (any user name).
fn authorization_token(h: &HeaderMap) -> Option<String> {
    let v = header_str(h, header::AUTHORIZATION)?.trim();
    let (scheme, rest) = v.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.trim().to_string());
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let pair = String::from_utf8(base64_decode(rest.trim())?).ok()?;
    Some(pair.split_once(':')?.1.to_string())
}

/// Standard base64 (RFC 4648, padding optional); None for anything else.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::{general_purpose, DecodePaddingMode, Engine, GeneralPurpose};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        general_purpose::GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(s).ok()
}

pub fn refuse(status: StatusCode, message: &str) -> Response {
    let body = crate::error::stamped(serde_json::json!({
        "status": "error",
        "token": "ERROR",
        "message": message,
        "error": message,
        "paths": [],
        "exit_code": crate::error::exit::ENV,
    }));
    (status, axum::Json(body)).into_response()
}

/// Whether `host` (a `Host` header) names this server: an IP address or
/// `localhost`, with this port.
fn own_host(host: &str, port: u16) -> bool {
    let Some((name, p)) = host.rsplit_once(':') else {
        return false;
    };
    if p.parse::<u16>().ok() != Some(port) {
        return false;
    }
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || (bare == name && name.parse::<std::net::Ipv4Addr>().is_ok())
        || (bare != name && bare.parse::<std::net::Ipv6Addr>().is_ok())
}

/// The guard in front of every route.
pub async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let h = req.headers();
    if !header_str(h, header::HOST).is_some_and(|host| own_host(host, app.port)) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "the Host header does not name this server (an address or localhost with its port)",
        );
    }
    let by_header = header_str(h, HEADER).is_some_and(|t| same(t, &app.token))
        || authorization_token(h).is_some_and(|t| same(&t, &app.token));
    let by_cookie = cookie_token(h, &cookie_name(app.port)).is_some_and(|t| same(t, &app.token));
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let own = header_str(h, header::HOST).map(|host| format!("http://{host}"));
        let origin = header_str(h, header::ORIGIN);
        if origin.is_some_and(|o| own.as_deref() != Some(o)) {
            return refuse(
                StatusCode::FORBIDDEN,
                "cross-origin request refused: this page only acts for itself",
            );
        }
        if header_str(h, "sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none") {
            return refuse(StatusCode::FORBIDDEN, "cross-site request refused");
        }
        // The cookie rides along on any request the browser makes; only the
        // page's own fetch (an Origin naming this server) may use it.
        let allowed = by_header || (by_cookie && origin.is_some());
        if !allowed {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "a state-changing request needs the cockpit's cookie from its own page, or the token in the X-Swarm-Token or Authorization header",
            );
        }
    } else {
        let by_query = query_token(req.uri().query()).is_some_and(|t| same(t, &app.token));
        if !by_header && !by_query && !by_cookie {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token: open the URL `swarm serve` printed (the token is also in .swarmforge/serve/token)",
            );
        }
        // A page on another port of this host is "same-site": the cookie
        // alone does not let it read.
        if !by_header
            && !by_query
            && header_str(h, "sec-fetch-site").is_some_and(|s| s != "same-origin" && s != "none")
        {
            return refuse(StatusCode::FORBIDDEN, "cross-site request refused");
        }
    }
    if let Some(s) = req.extensions().get::<super::listen::Shown>() {
        s.set();
    }
    let mut res = next.run(req).await;
    let hs = res.headers_mut();
    // The first URL carries the token: never send it on as a referrer.
    hs.insert(header::REFERRER_POLICY, "no-referrer".parse().unwrap());
    hs.insert(header::X_CONTENT_TYPE_OPTIONS, "nosniff".parse().unwrap());
    hs.insert(header::CACHE_CONTROL, "no-store".parse().unwrap());
    hs.insert(header::X_FRAME_OPTIONS, "DENY".parse().unwrap());
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_from_query_and_constant_time_compare() {
        assert_eq!(query_token(Some("a=1&token=abc")), Some("abc"));
        assert_eq!(query_token(Some("tokenx=abc")), None);
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=1; swarm_cockpit_80=t0k; x=2".parse().unwrap(),
        );
        assert_eq!(cookie_token(&h, "swarm_cockpit_80"), Some("t0k"));
        assert_eq!(cookie_token(&h, "swarm_cockpit_8"), None);
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        // What Go's client sends for http://swarm:t0k@127.0.0.1:port.
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "Basic c3dhcm06dDBr".parse().unwrap());
        assert_eq!(authorization_token(&h).as_deref(), Some("t0k"));
        h.insert(header::AUTHORIZATION, "bearer t0k".parse().unwrap());
        assert_eq!(authorization_token(&h).as_deref(), Some("t0k"));
        h.insert(header::AUTHORIZATION, "Basic !!".parse().unwrap());
        assert_eq!(authorization_token(&h), None);
        assert_eq!(base64_decode("aGVsbG8gd29ybGQ=").unwrap(), b"hello world");
    }

    #[test]
    fn the_host_must_be_an_address_or_localhost_with_the_port() {
        for ok in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:8080",
            "10.0.0.5:8080",
        ] {
            assert!(own_host(ok, 8080), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1:80",
            "127.0.0.1",
            "[::1]",
            "::1:8080",
            "127.0.0.1.nip.io:8080",
        ] {
            assert!(!own_host(bad, 8080), "{bad}");
        }
    }
}
