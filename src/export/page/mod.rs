//! The HTML pages: each one self-contained (no scripts, no external
//! files), its charts inlined as SVG.

pub mod agg;
