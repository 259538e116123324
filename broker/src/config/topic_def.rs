//! What a topic config is (its Kafka type and source, its definition) and how its
//! validation fails: shared by Kafka's topic configs (`topic`) and Strom's own `strom.*`
//! families (`ai_flow`), which `topic` lists and validates. Kept apart so those families
//! import definitions from below instead of from the module that lists them.

/// Kafka's `ConfigType` as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// Kafka's `ConfigSource` (DescribeConfigs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

pub struct TopicConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// The broker config (underscore form) that supplies the default, as in Kafka.
    pub broker_synonym: Option<&'static str>,
    /// Kafka's default when there is no broker synonym.
    pub default: &'static str,
    pub doc: &'static str,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TopicConfigError {
    #[error("Unknown topic config name: {0}")]
    Unknown(String),
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
    /// A rule over several configs (Kafka's `ConfigException` text, as Kafka words it).
    #[error("{0}")]
    Rule(String),
}
