//! Synthetic fleets.
