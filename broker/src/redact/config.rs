//! Named rule sets from the broker config file, which topics name in `strom.redact.rules`
//! beside the built-in ones:
//!
//! ```toml
//! [redact.rule_sets.orders]
//! rules = [
//!   { name = "order_id", pattern = "ORD-[0-9]{8}", mask = "keep_last:4" },
//!   { builtin = "cn_id", mask = "<ID>" },   # a built-in rule with another mask
//! ]
//! ```
//!
//! The file is read once at start (`install`); the sets live in a process-wide registry so
//! that topic config validation, which has no broker at hand, can refuse unknown names.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, RwLock};

use serde::Deserialize;

use super::{builtin, Mask, RedactError, Rule, RuleSet};

/// The top-level key of the broker config file this module reads.
pub const CONFIG_KEY: &str = "redact";

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RedactConfig {
    #[serde(default)]
    pub rule_sets: BTreeMap<String, RuleSetConfig>,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleSetConfig {
    pub rules: Vec<RuleConfig>,
}

/// A rule: `pattern` (with `name`, the counter label, default the set's name) or a
/// `builtin` rule; `mask` as `Mask::parse` reads it (default `****`, or the built-in's own).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub name: Option<String>,
    pub pattern: Option<String>,
    pub builtin: Option<String>,
    pub mask: Option<String>,
}

static NAMED: LazyLock<RwLock<BTreeMap<String, Arc<RuleSet>>>> =
    LazyLock::new(|| RwLock::new(BTreeMap::new()));

/// The rule set a topic names: a built-in one, else one from the broker config.
pub fn rule_set(name: &str) -> Option<Arc<RuleSet>> {
    builtin::set(name).or_else(|| {
        NAMED
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    })
}

/// Compiles every set of `config`, refusing the whole config on the first bad rule.
pub fn compile(config: &RedactConfig) -> Result<Vec<Arc<RuleSet>>, RedactError> {
    let mut out = Vec::new();
    for (set_name, set) in &config.rule_sets {
        let bad = |reason: &str| RedactError::RuleSet {
            set: set_name.clone(),
            reason: reason.into(),
        };
        if builtin::NAMES.contains(&set_name.as_str()) {
            return Err(bad("a built-in rule set has this name"));
        }
        if set_name.is_empty() || set_name.contains([',', ' ']) {
            return Err(bad(
                "a rule set name may not be empty or hold commas or spaces",
            ));
        }
        if set.rules.is_empty() {
            return Err(bad("no rules"));
        }
        let mut rules = Vec::new();
        for r in &set.rules {
            let name = r.name.clone().unwrap_or_else(|| set_name.clone());
            let rule = match (&r.pattern, &r.builtin) {
                (Some(p), None) => {
                    let mask = Mask::parse(&name, r.mask.as_deref().unwrap_or("****"))?;
                    Rule::new(&name, p, mask)?
                }
                (None, Some(b)) => {
                    let base =
                        builtin::set(b).ok_or_else(|| RedactError::UnknownRuleSet(b.clone()))?;
                    let base = &base.rules[0];
                    let name = r.name.clone().unwrap_or_else(|| base.name.clone());
                    let mask = match &r.mask {
                        Some(m) => Mask::parse(&name, m)?,
                        None => base.mask.clone(),
                    };
                    base.with_mask(&name, mask)
                }
                _ => return Err(bad("each rule needs exactly one of pattern and builtin")),
            };
            rules.push(Arc::new(rule));
        }
        out.push(Arc::new(RuleSet {
            name: set_name.clone(),
            rules,
        }));
    }
    Ok(out)
}

/// Makes `config`'s sets the named ones (replacing earlier ones of the same name).
pub fn install(config: &RedactConfig) -> Result<(), RedactError> {
    let sets = compile(config)?;
    let mut named = NAMED.write().unwrap_or_else(|e| e.into_inner());
    for s in sets {
        named.insert(s.name.clone(), s);
    }
    Ok(())
}

/// The `[redact]` table of a broker config file, if any.
pub fn from_serve_table(table: &toml::Table) -> Result<Option<RedactConfig>, toml::de::Error> {
    match table.get(CONFIG_KEY) {
        Some(v) => v.clone().try_into().map(Some),
        None => Ok(None),
    }
}
