//! The names of the event model's top-level fields, for the model, the parser and the parameters.

/// `eventName`.
pub const EVENT_NAME: &str = "eventName";
/// `eventTime`: epoch seconds, stamped by the server.
pub const EVENT_TIME: &str = "eventTime";
/// `eventId`: a UUID, the client's or the server's.
pub const EVENT_ID: &str = "eventId";
/// `eventParams`.
pub const EVENT_PARAMS: &str = "eventParams";
/// `gameId`: the game that sent the event, stamped by the server from the request's API key,
/// never taken from a client.
pub const GAME_ID: &str = "gameId";
/// The `eventName` of a purchase; its `eventParams.amount` is what bookings add up.
pub const PURCHASE_EVENT: &str = "purchaseEvent";
/// The game the stack's canary and `lakelog check` send their probes as: reserved (`lakelog
/// games` refuses to make it), left out of every KPI, and its rows erased once seen.
pub const PROBE_GAME: &str = "lakelog-probe";
/// The `eventName` of a probe.
pub const PROBE_EVENT: &str = "lakelogProbe";

/// Names of the top-level fields the model reads itself (none of them is ever in `extra`).
pub const RESERVED_FIELDS: [&str; 5] = [EVENT_NAME, EVENT_TIME, EVENT_ID, EVENT_PARAMS, GAME_ID];
