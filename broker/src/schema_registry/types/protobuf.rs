//! PROTOBUF: `.proto` text (proto2, proto3) or a base64 `FileDescriptorProto` (what
//! confluent-kafka-python's serializer registers), compiled by `protox` with its references
//! as imports (a reference's `name` is the import path; `google/protobuf/*.proto` are built
//! in). The canonical string is the `.proto` text printed from the compiled descriptor, and
//! `serialized` the descriptor in base64 (`?format=serialized`).
//!
//! Compatibility is Confluent's `protobuf.diff`: differences between an original (older)
//! and an update (newer) file, by message name and field tag; the update reads the
//! original's data when every difference is in `SchemaDiff.COMPATIBLE_CHANGES`.

use std::collections::{BTreeSet, HashMap, HashSet};

use base64::Engine;
use prost_reflect::prost::Message;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{
    Cardinality, DescriptorPool, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor,
};
use protox::file::{File, FileResolver, GoogleFileResolver};

use super::Resolved;

/// The name Confluent gives a schema's own file (`ProtobufSchema.DEFAULT_NAME`).
const DEFAULT_NAME: &str = "default";

#[derive(Debug)]
pub struct ProtoSchema {
    pub canonical: String,
    /// Base64 of the compiled `FileDescriptorProto`.
    pub serialized: String,
    pool: DescriptorPool,
    file: String,
}

impl ProtoSchema {
    fn file(&self) -> FileDescriptor {
        self.pool
            .get_file_by_name(&self.file)
            .expect("the compiled file is in its own pool")
    }

    /// Message `full_name` of this schema, for deep validation of payloads.
    pub fn message(&self, index_path: &[i32]) -> Option<MessageDescriptor> {
        let file = self.file();
        let (first, rest) = index_path.split_first().unwrap_or((&0, &[]));
        let mut m = file.messages().nth(usize::try_from(*first).ok()?)?;
        for i in rest {
            let child = m.child_messages().nth(usize::try_from(*i).ok()?)?;
            m = child;
        }
        Some(m)
    }
}

/// A schema string as a file: `.proto` text, else a base64 descriptor.
fn to_file(name: &str, schema: &str) -> Result<File, String> {
    match File::from_source(name, schema) {
        Ok(f) => Ok(f),
        Err(text_err) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(schema.trim())
                .map_err(|_| text_err.to_string())?;
            let mut fd =
                FileDescriptorProto::decode(bytes.as_slice()).map_err(|_| text_err.to_string())?;
            fd.name = Some(name.to_string());
            Ok(File::from_file_descriptor_proto(fd))
        }
    }
}

struct Resolver {
    files: HashMap<String, String>,
    google: GoogleFileResolver,
}

impl FileResolver for Resolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.files.get(name) {
            Some(schema) => to_file(name, schema).map_err(|e| protox::Error::new(SchemaError(e))),
            None => self.google.open_file(name),
        }
    }
}

#[derive(Debug)]
struct SchemaError(String);

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SchemaError {}

fn collect(refs: &[Resolved], out: &mut HashMap<String, String>) {
    for r in refs {
        out.entry(r.name.clone())
            .or_insert_with(|| r.schema.clone());
        collect(&r.references, out);
    }
}

pub fn parse(
    schema: &str,
    references: &[Resolved],
    _normalize: bool,
) -> Result<ProtoSchema, String> {
    let mut files = HashMap::new();
    collect(references, &mut files);
    if files.contains_key(DEFAULT_NAME) {
        return Err(format!("a reference may not be named {DEFAULT_NAME}"));
    }
    files.insert(DEFAULT_NAME.to_string(), schema.to_string());
    let mut compiler = protox::Compiler::with_file_resolver(Resolver {
        files,
        google: GoogleFileResolver::new(),
    });
    compiler.include_imports(true);
    compiler
        .open_file(DEFAULT_NAME)
        .map_err(|e| format!("{e}"))?;
    let pool = compiler.descriptor_pool();
    let file = pool
        .get_file_by_name(DEFAULT_NAME)
        .ok_or_else(|| "the schema did not compile".to_string())?;
    let fd = file.file_descriptor_proto().clone();
    let canonical = super::protobuf_print::print(&fd);
    let serialized = base64::engine::general_purpose::STANDARD.encode(fd.encode_to_vec());
    Ok(ProtoSchema {
        canonical,
        serialized,
        pool,
        file: DEFAULT_NAME.to_string(),
    })
}

/// Confluent's `Difference.Type` for PROTOBUF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diff {
    PackageChanged,
    MessageAdded,
    MessageRemoved,
    EnumAdded,
    EnumRemoved,
    EnumConstAdded,
    EnumConstChanged,
    EnumConstRemoved,
    FieldAdded,
    FieldRemoved,
    FieldNameChanged,
    FieldKindChanged,
    FieldScalarKindChanged,
    FieldNamedTypeChanged,
    FieldNumericLabelChanged,
    FieldStringOrBytesLabelChanged,
    RequiredFieldAdded,
    RequiredFieldRemoved,
    OneofAdded,
    OneofRemoved,
    OneofFieldAdded,
    OneofFieldRemoved,
    OneofFieldMovedToTopLevel,
    MultipleFieldsMovedToOneof,
    FieldMovedToExistingOneof,
}

impl Diff {
    /// `SchemaDiff.COMPATIBLE_CHANGES`.
    pub fn compatible(self) -> bool {
        use Diff::*;
        matches!(
            self,
            MessageAdded
                | EnumAdded
                | EnumRemoved
                | EnumConstAdded
                | EnumConstChanged
                | EnumConstRemoved
                | FieldAdded
                | FieldRemoved
                | FieldNameChanged
                | FieldStringOrBytesLabelChanged
                | OneofAdded
                | OneofRemoved
                | OneofFieldAdded
                | OneofFieldMovedToTopLevel
        )
    }

    pub fn name(self) -> String {
        super::confluent_name(&format!("{self:?}"))
    }
}

/// Why `reader` cannot read what `writer` wrote.
pub fn read_errors(reader: &ProtoSchema, writer: &ProtoSchema) -> Vec<String> {
    differences(writer, reader)
        .into_iter()
        .filter(|(d, _)| !d.compatible())
        .map(|(d, path)| {
            format!(
                "{{errorType:\"{}\", description:\"Found incompatible change at path '{path}'\"}}",
                d.name()
            )
        })
        .collect()
}

/// Every difference from `original` to `update` with its path (`#/Message/tag`).
pub fn differences(original: &ProtoSchema, update: &ProtoSchema) -> Vec<(Diff, String)> {
    let (o, u) = (original.file(), update.file());
    let mut ctx = Ctx::default();
    if o.package_name() != u.package_name() {
        ctx.add(Diff::PackageChanged, "#/");
    }
    ctx.types(
        o.messages().collect(),
        o.enums().collect(),
        u.messages().collect(),
        u.enums().collect(),
        "#",
    );
    ctx.diffs
}

#[derive(Default)]
struct Ctx {
    diffs: Vec<(Diff, String)>,
    /// (original, update) message pairs compared already: ends recursive types.
    seen: HashSet<(String, String)>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FieldKind {
    Scalar,
    Message,
    Map,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ScalarKind {
    GeneralNumber,
    SignedNumber,
    StringOrBytes,
    Fixed32,
    Fixed64,
    Float,
    Double,
}

fn field_kind(f: &FieldDescriptor) -> FieldKind {
    if f.is_map() {
        return FieldKind::Map;
    }
    match f.kind() {
        Kind::Message(_) => FieldKind::Message,
        _ => FieldKind::Scalar,
    }
}

fn scalar_kind(k: &Kind) -> ScalarKind {
    match k {
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => {
            ScalarKind::GeneralNumber
        }
        Kind::Sint32 | Kind::Sint64 => ScalarKind::SignedNumber,
        Kind::String | Kind::Bytes => ScalarKind::StringOrBytes,
        Kind::Fixed32 | Kind::Sfixed32 => ScalarKind::Fixed32,
        Kind::Fixed64 | Kind::Sfixed64 => ScalarKind::Fixed64,
        Kind::Float => ScalarKind::Float,
        Kind::Double => ScalarKind::Double,
        Kind::Message(_) => ScalarKind::GeneralNumber,
    }
}

/// The real (not proto3-`optional` synthetic) oneof of a field.
fn oneof_of(f: &FieldDescriptor) -> Option<String> {
    f.containing_oneof()
        .filter(|o| !o.is_synthetic())
        .map(|o| o.name().to_string())
}

fn local_name(m: &MessageDescriptor) -> String {
    let pkg = m.package_name();
    let full = m.full_name();
    if pkg.is_empty() {
        full.to_string()
    } else {
        full.strip_prefix(&format!("{pkg}."))
            .unwrap_or(full)
            .to_string()
    }
}

impl Ctx {
    fn add(&mut self, d: Diff, path: &str) {
        self.diffs.push((d, path.to_string()));
    }

    fn compatible(&self) -> bool {
        self.diffs.iter().all(|(d, _)| d.compatible())
    }

    fn types(
        &mut self,
        om: Vec<MessageDescriptor>,
        oe: Vec<prost_reflect::EnumDescriptor>,
        um: Vec<MessageDescriptor>,
        ue: Vec<prost_reflect::EnumDescriptor>,
        path: &str,
    ) {
        let om: Vec<_> = om.into_iter().filter(|m| !m.is_map_entry()).collect();
        let um: Vec<_> = um.into_iter().filter(|m| !m.is_map_entry()).collect();
        let names: BTreeSet<String> = om
            .iter()
            .chain(um.iter())
            .map(|m| m.name().to_string())
            .collect();
        for name in names {
            let p = format!("{path}/{name}");
            match (
                om.iter().find(|m| m.name() == name),
                um.iter().find(|m| m.name() == name),
            ) {
                (Some(_), None) => self.add(Diff::MessageRemoved, &p),
                (None, Some(_)) => self.add(Diff::MessageAdded, &p),
                (Some(a), Some(b)) => self.message(a, b, &p),
                (None, None) => {}
            }
        }
        let names: BTreeSet<String> = oe
            .iter()
            .chain(ue.iter())
            .map(|e| e.name().to_string())
            .collect();
        for name in names {
            let p = format!("{path}/{name}");
            match (
                oe.iter().find(|e| e.name() == name),
                ue.iter().find(|e| e.name() == name),
            ) {
                (Some(_), None) => self.add(Diff::EnumRemoved, &p),
                (None, Some(_)) => self.add(Diff::EnumAdded, &p),
                (Some(a), Some(b)) => {
                    let tags: BTreeSet<i32> =
                        a.values().chain(b.values()).map(|v| v.number()).collect();
                    for tag in tags {
                        let p = format!("{p}/{tag}");
                        match (a.get_value(tag), b.get_value(tag)) {
                            (Some(_), None) => self.add(Diff::EnumConstRemoved, &p),
                            (None, Some(_)) => self.add(Diff::EnumConstAdded, &p),
                            (Some(x), Some(y)) if x.name() != y.name() => {
                                self.add(Diff::EnumConstChanged, &p)
                            }
                            _ => {}
                        }
                    }
                }
                (None, None) => {}
            }
        }
    }

    /// Confluent's `MessageSchemaDiff.compare`.
    fn message(&mut self, o: &MessageDescriptor, u: &MessageDescriptor, path: &str) {
        if !self
            .seen
            .insert((o.full_name().to_string(), u.full_name().to_string()))
        {
            return;
        }
        let of: HashMap<u32, FieldDescriptor> = o.fields().map(|f| (f.number(), f)).collect();
        let uf: HashMap<u32, FieldDescriptor> = u.fields().map(|f| (f.number(), f)).collect();
        let real_oneofs = |m: &MessageDescriptor| -> BTreeSet<String> {
            m.oneofs()
                .filter(|x| !x.is_synthetic())
                .map(|x| x.name().to_string())
                .collect()
        };
        let (oo, uo) = (real_oneofs(o), real_oneofs(u));
        // An original oneof none of whose members survive was deleted whole (compatible).
        let deleted_whole: HashSet<String> = oo
            .iter()
            .filter(|name| !uo.contains(*name))
            .filter(|name| {
                !o.fields()
                    .filter(|f| oneof_of(f).as_deref() == Some(name.as_str()))
                    .any(|f| uf.contains_key(&f.number()))
            })
            .cloned()
            .collect();
        // New mutual exclusivity: an update oneof whose existing members came from more than
        // one original group (a oneof, or each top-level field on its own).
        for name in &uo {
            let mut groups = HashSet::new();
            let mut top_level_moved_in = 0;
            for f in u
                .fields()
                .filter(|f| oneof_of(f).as_deref() == Some(name.as_str()))
            {
                if let Some(orig) = of.get(&f.number()) {
                    match oneof_of(orig) {
                        Some(g) => {
                            groups.insert(format!("oneof:{g}"));
                        }
                        None => {
                            groups.insert(format!("field:{}", f.number()));
                            top_level_moved_in += 1;
                        }
                    }
                }
            }
            if groups.len() > 1 {
                let p = format!("{path}/{name}");
                self.add(
                    if top_level_moved_in > 1 {
                        Diff::MultipleFieldsMovedToOneof
                    } else {
                        Diff::FieldMovedToExistingOneof
                    },
                    &p,
                );
            }
        }
        for name in oo.union(&uo) {
            let p = format!("{path}/{name}");
            if !uo.contains(name) {
                self.add(Diff::OneofRemoved, &p);
            } else if !oo.contains(name) {
                self.add(Diff::OneofAdded, &p);
            }
        }
        let tags: BTreeSet<u32> = of.keys().chain(uf.keys()).copied().collect();
        for tag in tags {
            match (of.get(&tag), uf.get(&tag)) {
                (Some(a), None) => match oneof_of(a) {
                    Some(g) if !deleted_whole.contains(&g) => {
                        self.add(Diff::OneofFieldRemoved, &format!("{path}/{g}/{tag}"))
                    }
                    Some(_) => {}
                    None => self.add(
                        if a.cardinality() == Cardinality::Required {
                            Diff::RequiredFieldRemoved
                        } else {
                            Diff::FieldRemoved
                        },
                        &format!("{path}/{tag}"),
                    ),
                },
                (None, Some(b)) => match oneof_of(b) {
                    Some(g) => self.add(Diff::OneofFieldAdded, &format!("{path}/{g}/{tag}")),
                    None => self.add(
                        if b.cardinality() == Cardinality::Required {
                            Diff::RequiredFieldAdded
                        } else {
                            Diff::FieldAdded
                        },
                        &format!("{path}/{tag}"),
                    ),
                },
                (Some(a), Some(b)) => {
                    let p = match oneof_of(b) {
                        Some(g) => format!("{path}/{g}/{tag}"),
                        None => format!("{path}/{tag}"),
                    };
                    if oneof_of(a).is_some() && oneof_of(b).is_none() {
                        self.add(Diff::OneofFieldMovedToTopLevel, &format!("{path}/{tag}"));
                    }
                    self.field(a, b, &p);
                }
                (None, None) => {}
            }
        }
        self.types(
            o.child_messages().collect(),
            o.child_enums().collect(),
            u.child_messages().collect(),
            u.child_enums().collect(),
            path,
        );
    }

    /// Confluent's `FieldSchemaDiff.compare`.
    fn field(&mut self, a: &FieldDescriptor, b: &FieldDescriptor, path: &str) {
        if a.name() != b.name() {
            self.add(Diff::FieldNameChanged, path);
        }
        let label = |f: &FieldDescriptor| {
            if f.is_map() {
                None
            } else {
                Some(f.cardinality())
            }
        };
        self.labels_and_kinds(
            label(a),
            label(b),
            a.kind(),
            b.kind(),
            field_kind(a),
            field_kind(b),
            path,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn labels_and_kinds(
        &mut self,
        la: Option<Cardinality>,
        lb: Option<Cardinality>,
        ka: Kind,
        kb: Kind,
        fa: FieldKind,
        fb: FieldKind,
        path: &str,
    ) {
        if fa != fb {
            return self.add(Diff::FieldKindChanged, path);
        }
        match fa {
            FieldKind::Scalar => {
                let (sa, sb) = (scalar_kind(&ka), scalar_kind(&kb));
                if sa != sb {
                    return self.add(Diff::FieldScalarKindChanged, path);
                }
                if let (Some(x), Some(y)) = (la, lb) {
                    if x != y {
                        match sa {
                            ScalarKind::StringOrBytes => {
                                self.add(Diff::FieldStringOrBytesLabelChanged, path)
                            }
                            _ => self.add(Diff::FieldNumericLabelChanged, path),
                        }
                    }
                }
            }
            FieldKind::Message => {
                let (Kind::Message(ma), Kind::Message(mb)) = (ka, kb) else {
                    return;
                };
                if local_name(&ma) != local_name(&mb) {
                    return self.add(Diff::FieldNamedTypeChanged, path);
                }
                // Types of the schema's own file are compared where they are defined; a type
                // from a reference is compared here, in a context of its own.
                let own = |m: &MessageDescriptor| m.parent_file().name() == DEFAULT_NAME;
                if !own(&ma) || !own(&mb) {
                    let mut sub = Ctx {
                        diffs: Vec::new(),
                        seen: self.seen.clone(),
                    };
                    sub.message(&ma, &mb, path);
                    let ok = sub.compatible();
                    self.seen.extend(sub.seen);
                    self.diffs.extend(sub.diffs);
                    if !ok {
                        self.add(Diff::FieldNamedTypeChanged, path);
                    }
                }
            }
            FieldKind::Map => {
                let (Kind::Message(ea), Kind::Message(eb)) = (ka, kb) else {
                    return;
                };
                for f in [ea.map_entry_key_field(), ea.map_entry_value_field()] {
                    let g = if f.number() == 1 {
                        eb.map_entry_key_field()
                    } else {
                        eb.map_entry_value_field()
                    };
                    self.labels_and_kinds(
                        None,
                        None,
                        f.kind(),
                        g.kind(),
                        field_kind(&f),
                        field_kind(&g),
                        path,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ProtoSchema {
        parse(s, &[], false).unwrap_or_else(|e| panic!("{e}\n{s}"))
    }

    fn incompatible(new: &str, old: &str) -> Vec<String> {
        read_errors(&p(new), &p(old))
    }

    const V1: &str = r#"syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int64 amount = 2;
  oneof payment { string card = 3; string iban = 4; }
  map<string, string> tags = 5;
  Item item = 6;
}
message Item { string sku = 1; }
enum Status { UNKNOWN = 0; OK = 1; }
"#;

    #[test]
    fn given_text_and_descriptor_forms_when_parsing_then_same_canonical() {
        let text = p(V1);
        assert!(
            text.canonical.contains("map<string, string> tags = 5;"),
            "{}",
            text.canonical
        );
        assert!(
            text.canonical.contains("oneof payment {"),
            "{}",
            text.canonical
        );
        // What confluent-kafka-python sends: the base64 FileDescriptorProto.
        let from_descriptor = p(&text.serialized);
        assert_eq!(from_descriptor.canonical, text.canonical);
        // The canonical text parses to itself.
        assert_eq!(p(&text.canonical).canonical, text.canonical);
    }

    #[test]
    fn given_bad_protos_when_parsing_then_error() {
        // (An empty string is a valid, empty proto2 file: the registry refuses it before.)
        for bad in [
            "message {",
            "syntax = \"proto3\"; message A { string a = 1; int32 a = 2; }",
            "aGVsbG8=",
            "import \"missing.proto\";",
        ] {
            assert!(parse(bad, &[], false).is_err(), "{bad}");
        }
    }

    #[test]
    fn given_confluent_compatible_changes_then_no_errors() {
        for new in [
            // field added, field renamed, enum constant added, message added
            V1.replace("Item item = 6;", "Item item = 6;\n  string note = 7;"),
            V1.replace("int64 amount = 2;", "int64 total = 2;"),
            V1.replace("OK = 1;", "OK = 1; LATE = 2;"),
            format!("{V1}\nmessage Extra {{ int32 x = 1; }}"),
            // field removed, string <-> bytes
            V1.replace("int64 amount = 2;", ""),
            V1.replace("string id = 1;", "bytes id = 1;"),
            // int32 <-> int64 are one scalar kind
            V1.replace("int64 amount = 2;", "int32 amount = 2;"),
        ] {
            let errs = incompatible(&new, V1);
            assert!(errs.is_empty(), "{errs:?}\n{new}");
        }
    }

    #[test]
    fn given_confluent_incompatible_changes_then_error_types() {
        for (new, expected) in [
            (
                V1.replace("int64 amount = 2;", "string amount = 2;"),
                "FIELD_SCALAR_KIND_CHANGED",
            ),
            (
                V1.replace("Item item = 6;", "string item = 6;"),
                "FIELD_KIND_CHANGED",
            ),
            (
                V1.replace("package shop;", "package store;"),
                "PACKAGE_CHANGED",
            ),
            (
                V1.replace(
                    "message Item { string sku = 1; }",
                    "message Item { string sku = 1; }\nmessage Other { string sku = 1; }",
                )
                .replace("Item item = 6;", "Other item = 6;"),
                "FIELD_NAMED_TYPE_CHANGED",
            ),
            (
                V1.replace("message Item { string sku = 1; }", "")
                    .replace("Item item = 6;", "string item = 6;"),
                "MESSAGE_REMOVED",
            ),
            (
                V1.replace(
                    "oneof payment { string card = 3; string iban = 4; }",
                    "string card = 3; string iban = 4;",
                )
                .replace(
                    "string id = 1;",
                    "oneof key { string id = 1; int64 amount = 2; }",
                )
                .replace("  int64 amount = 2;\n", ""),
                "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
            ),
            (
                V1.replace(
                    "oneof payment { string card = 3; string iban = 4; }",
                    "oneof payment { string card = 3; }",
                ),
                "ONEOF_FIELD_REMOVED",
            ),
        ] {
            let errs = incompatible(&new, V1);
            assert!(
                errs.iter().any(|e| e.contains(expected)),
                "{expected}: {errs:?}\n{new}"
            );
        }
    }

    #[test]
    fn given_reference_when_parsing_then_import_resolves_and_types_compare_through_it() {
        let common = Resolved {
            name: "common/money.proto".into(),
            subject: "money".into(),
            version: 1,
            schema: "syntax = \"proto3\";\npackage common;\nmessage Money { int64 units = 1; }\n"
                .into(),
            references: vec![],
        };
        let order = "syntax = \"proto3\";\npackage shop;\nimport \"common/money.proto\";\nimport \"google/protobuf/timestamp.proto\";\nmessage Order { common.Money price = 1; google.protobuf.Timestamp at = 2; }\n";
        let parsed = parse(order, std::slice::from_ref(&common), false).unwrap();
        assert!(
            parsed.canonical.contains("import \"common/money.proto\";"),
            "{}",
            parsed.canonical
        );
        assert!(
            parse(order, &[], false).is_err(),
            "the import must be given as a reference"
        );
        let changed = Resolved {
            schema: "syntax = \"proto3\";\npackage common;\nmessage Money { string units = 1; }\n"
                .into(),
            ..common
        };
        let new = parse(order, &[changed], false).unwrap();
        let errs = read_errors(&new, &parsed);
        assert!(
            errs.iter().any(|e| e.contains("FIELD_SCALAR_KIND_CHANGED")),
            "{errs:?}"
        );
    }
}
