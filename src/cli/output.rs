//! `-o table|json|yaml`, the same for every subcommand that prints an answer: the table for
//! people, JSON and YAML of one serialized report for scripts (the same fields in both).

use std::io::Write;

use serde::Serialize;

/// How a subcommand prints its answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Lines for people.
    #[default]
    Table,
    /// One JSON document (a stable contract for scripts).
    Json,
    /// The same document as YAML.
    Yaml,
}

/// The `-o` flag.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("failed to render the report as JSON")]
    Json(#[from] serde_json::Error),
    #[error("failed to render the report as YAML")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

impl Output {
    /// `report` as this format; `table` draws it for people.
    pub fn render<T: Serialize>(
        self,
        report: &T,
        table: impl FnOnce(&T) -> String,
    ) -> Result<String, RenderError> {
        Ok(match self {
            Output::Table => table(report),
            Output::Json => {
                let mut json = serde_json::to_string_pretty(report)?;
                json.push('\n');
                json
            }
            Output::Yaml => serde_saphyr::to_string(report)?,
        })
    }

    /// Prints `report` on stdout; an error rendering it on stderr.
    pub fn print<T: Serialize>(self, report: &T, table: impl FnOnce(&T) -> String) {
        match self.render(report, table) {
            // A closed stdout (e.g. `| head`) is not worth a panic.
            Ok(text) => {
                let _ = std::io::stdout().write_all(text.as_bytes());
            }
            Err(err) => eprintln!("error: {}", crate::telemetry::error_chain(&err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Report {
        dry_run: bool,
        pods: Vec<&'static str>,
    }

    #[test]
    fn json_and_yaml_carry_the_same_fields_and_the_table_is_the_caller_s() {
        let report = Report {
            dry_run: true,
            pods: vec!["shop/web"],
        };
        let json = Output::Json.render(&report, |_| String::new()).unwrap();
        let yaml = Output::Yaml.render(&report, |_| String::new()).unwrap();
        let from_json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(from_json, from_yaml);
        assert_eq!(from_json["dryRun"], true);
        assert_eq!(from_json["pods"][0], "shop/web");
        let table = Output::Table.render(&report, |r| format!("{} pod(s)\n", r.pods.len()));
        assert_eq!(table.unwrap(), "1 pod(s)\n");
    }
}
