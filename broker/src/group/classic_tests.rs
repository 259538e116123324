//! Unit tests of the classic group state machine: every transition, with injected time.
