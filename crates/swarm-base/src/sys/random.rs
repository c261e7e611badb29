//! Secrets from the kernel's random source (getrandom(2)): the tokens of
//! `swarm serve` and `swarm a2a`.

/// 32 random bytes as 64 lower-case hex digits.
pub fn hex_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(std::io::Error::from)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
