//! Which remedies a `--remedies` run measures: the user's list checked against the scenario's
//! names. How a remedied run is judged is the model's ([`tcpdoctor_model::remedy`]): pure, and
//! testable without a lab.

/// Which remedies `--remedies` selected: `all`, or names from `known` separated by commas.
pub fn select(spec: &str, known: &[&str]) -> crate::Result<Vec<String>> {
    let spec = spec.trim();
    if spec.is_empty() || spec == "all" {
        return Ok(known.iter().map(|s| s.to_string()).collect());
    }
    let mut out = Vec::new();
    for name in spec.split(',').map(str::trim) {
        if !known.contains(&name) {
            return Err(crate::Error::invalid(
                format!("--remedies '{name}'"),
                format!(
                    "unknown remedy; this scenario has: all, {}",
                    known.join(", ")
                ),
            ));
        }
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_names_known_remedies() {
        let known = ["keep-alive", "tw-reuse"];
        assert_eq!(
            select("all", &known).unwrap(),
            vec!["keep-alive", "tw-reuse"]
        );
        assert_eq!(
            select("tw-reuse,tw-reuse", &known).unwrap(),
            vec!["tw-reuse"]
        );
        let e = select("keepalive", &known).unwrap_err().to_string();
        assert!(
            e.contains("--remedies 'keepalive'") && e.contains("keep-alive, tw-reuse"),
            "{e}"
        );
    }
}
