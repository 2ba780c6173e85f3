//! The JSON document (schema `thrum.result.v1`, see docs/json.md).

use std::io::{self, Write};

use super::Exporter;
use crate::result::TestResult;

pub struct Json;

impl Exporter for Json {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, r)?;
        writeln!(out)
    }
}
