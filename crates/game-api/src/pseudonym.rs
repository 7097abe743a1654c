//! Pseudonymisation at the door: a game can have chosen text parameters of its events (its
//! player ids: `device_id`, ...) replaced by a keyed hash before their records are written, so
//! that neither the stream nor the lake ever holds the raw id.
//!
//! The hash is HMAC-SHA256 with the game's own secret key, written as 64 lower-case hex digits:
//! the same id always gives the same pseudonym, so every KPI (DAU, retention, sessions) is what
//! it is on the raw ids; without the key nobody can recompute a pseudonym from an id. A pseudonym
//! is still personal data while the key exists (whoever holds the key can link an id to it);
//! deleting the key makes the game's pseudonyms unlinkable for good.

use game_events::{EventParams, GameEvent};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The least bytes a game's key has: 128 bits.
pub const MIN_KEY_BYTES: usize = 16;

/// Which parameters of a game's events are replaced, and the key that hashes them.
#[derive(Clone)]
pub struct Pseudonym {
    params: Vec<String>,
    key: Vec<u8>,
    /// HMAC-SHA256 keyed once with `key`; each pseudonym starts from a copy.
    keyed: Hmac<Sha256>,
}

impl PartialEq for Pseudonym {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params && self.key == other.key
    }
}

impl Eq for Pseudonym {}

impl std::fmt::Debug for Pseudonym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Pseudonym")
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// Why a pseudonymisation setting is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PseudonymError {
    /// The key is too short.
    #[error("the pseudonym key has {bytes} bytes; at least {MIN_KEY_BYTES} are needed")]
    ShortKey {
        /// Its length.
        bytes: usize,
    },
    /// No parameter, or a name that is not one.
    #[error("{0:?} is not a list of event parameter names (such as device_id,player_id)")]
    Params(String),
}

impl Pseudonym {
    /// Replaces the parameters named in `params` (comma-separated: `device_id,player_id`) with
    /// their HMAC under `key`.
    pub fn new(params: &str, key: Vec<u8>) -> Result<Self, PseudonymError> {
        let names: Vec<String> = params.split(',').map(str::trim).map(str::to_owned).collect();
        let valid =
            |n: &String| !n.is_empty() && n.len() <= 128 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if names.is_empty() || !names.iter().all(valid) {
            return Err(PseudonymError::Params(params.to_owned()));
        }
        if key.len() < MIN_KEY_BYTES {
            return Err(PseudonymError::ShortKey { bytes: key.len() });
        }
        // HMAC takes a key of any length: this cannot fail.
        let keyed = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| PseudonymError::ShortKey { bytes: key.len() })?;
        Ok(Self {
            params: names,
            key,
            keyed,
        })
    }

    /// The parameters it replaces.
    pub fn params(&self) -> &[String] {
        &self.params
    }

    /// The pseudonym of `id`: HMAC-SHA256 under the game's key, in hex.
    pub fn of(&self, id: &str) -> String {
        let mut mac = self.keyed.clone();
        mac.update(id.as_bytes());
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `event` with each of its parameters that are texts replaced by their pseudonym (other
    /// values, such as a number sent where an id was expected, are replaced by the pseudonym of
    /// their JSON text).
    pub fn apply(&self, mut event: GameEvent) -> GameEvent {
        let Some(params) = event.event_params.take() else {
            return event;
        };
        let Ok(serde_json::Value::Object(mut map)) = serde_json::to_value(&params) else {
            event.event_params = Some(params);
            return event;
        };
        for name in &self.params {
            if let Some(value) = map.get_mut(name) {
                let text = match &*value {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => continue,
                    other => other.to_string(),
                };
                *value = serde_json::Value::String(self.of(&text));
            }
        }
        // Parameters that no longer read as the model (a typed parameter given a pseudonym of
        // the wrong type) lose every value rather than keep a raw id.
        event.event_params =
            Some(serde_json::from_value::<EventParams>(serde_json::Value::Object(map)).unwrap_or_default());
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(device: &str) -> GameEvent {
        serde_json::from_value(serde_json::json!({
            "eventName": "levelUp",
            "eventParams": {"device_id": device, "level": 3, "player_id": "p-1", "client_event_time": "2024-06-01T10:00:00.000Z"}
        }))
        .unwrap()
    }

    #[test]
    fn the_same_id_gives_the_same_pseudonym_and_other_keys_other_ones() {
        let a = Pseudonym::new("device_id", b"0123456789abcdef".to_vec()).unwrap();
        let b = Pseudonym::new("device_id", b"fedcba9876543210".to_vec()).unwrap();
        assert_eq!(a.of("d-1"), a.of("d-1"));
        assert_ne!(a.of("d-1"), a.of("d-2"));
        assert_ne!(a.of("d-1"), b.of("d-1"));
        assert_eq!(a.of("d-1").len(), 64);
    }

    #[test]
    fn only_the_named_parameters_change() {
        let p = Pseudonym::new("device_id, player_id", b"0123456789abcdef".to_vec()).unwrap();
        let out = serde_json::to_value(p.apply(event("d-1"))).unwrap();
        assert_eq!(out["eventParams"]["device_id"], p.of("d-1"));
        assert_eq!(out["eventParams"]["player_id"], p.of("p-1"));
        assert_eq!(out["eventParams"]["level"], 3);
        assert!(!out.to_string().contains("\"d-1\""));
    }

    #[test]
    fn bad_settings_are_refused_and_the_key_never_printed() {
        assert!(matches!(
            Pseudonym::new("device_id", b"short".to_vec()),
            Err(PseudonymError::ShortKey { bytes: 5 })
        ));
        assert!(Pseudonym::new("", b"0123456789abcdef".to_vec()).is_err());
        assert!(Pseudonym::new("a.b", b"0123456789abcdef".to_vec()).is_err());
        let p = Pseudonym::new("device_id", b"0123456789abcdef".to_vec()).unwrap();
        assert!(!format!("{p:?}").contains("0123"));
    }
}
