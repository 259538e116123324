//! `.proto` text from a `FileDescriptorProto`: the canonical string of a PROTOBUF schema.
//! Confluent prints its schemas the same way (from the parsed file, in a fixed layout), so
//! the text form and the descriptor form (base64, what confluent-kafka-python sends) of one
//! schema come out as the same string.
//!
//! Printed: syntax, package, imports, the usual file/message/field/enum options, messages
//! (fields in declaration order, real oneofs as blocks, maps as `map<K, V>`, proto3
//! `optional`, reserved ranges and names, nested types), enums, extensions and services.
//! Custom (extension) options are not kept by `prost-types` and are not printed.

use std::fmt::Write;

use prost_reflect::prost_types::field_descriptor_proto::{Label, Type};
use prost_reflect::prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    ServiceDescriptorProto,
};

pub fn print(file: &FileDescriptorProto) -> String {
    let mut out = String::new();
    let syntax = file.syntax();
    let proto3 = syntax == "proto3";
    let _ = writeln!(
        out,
        "syntax = \"{}\";",
        if syntax.is_empty() { "proto2" } else { syntax }
    );
    if !file.package().is_empty() {
        let _ = writeln!(out, "package {};", file.package());
    }
    if !file.dependency.is_empty() {
        out.push('\n');
        for (i, dep) in file.dependency.iter().enumerate() {
            let public = file.public_dependency.contains(&(i as i32));
            let weak = file.weak_dependency.contains(&(i as i32));
            let kind = if public {
                "public "
            } else if weak {
                "weak "
            } else {
                ""
            };
            let _ = writeln!(out, "import {kind}{};", quote(dep));
        }
    }
    if let Some(o) = &file.options {
        let mut opts = Vec::new();
        if let Some(v) = &o.java_package {
            opts.push(("java_package", quote(v)));
        }
        if let Some(v) = &o.java_outer_classname {
            opts.push(("java_outer_classname", quote(v)));
        }
        if let Some(v) = o.java_multiple_files {
            opts.push(("java_multiple_files", v.to_string()));
        }
        if let Some(v) = &o.go_package {
            opts.push(("go_package", quote(v)));
        }
        if o.optimize_for.is_some() {
            opts.push(("optimize_for", o.optimize_for().as_str_name().to_string()));
        }
        if let Some(v) = o.cc_enable_arenas {
            opts.push(("cc_enable_arenas", v.to_string()));
        }
        if let Some(v) = &o.objc_class_prefix {
            opts.push(("objc_class_prefix", quote(v)));
        }
        if let Some(v) = &o.csharp_namespace {
            opts.push(("csharp_namespace", quote(v)));
        }
        if let Some(v) = o.deprecated {
            opts.push(("deprecated", v.to_string()));
        }
        if !opts.is_empty() {
            out.push('\n');
            for (k, v) in opts {
                let _ = writeln!(out, "option {k} = {v};");
            }
        }
    }
    for m in &file.message_type {
        out.push('\n');
        message(&mut out, m, 0, proto3);
    }
    for e in &file.enum_type {
        out.push('\n');
        enumeration(&mut out, e, 0);
    }
    extensions(&mut out, &file.extension, 0, proto3, true);
    for s in &file.service {
        out.push('\n');
        service(&mut out, s);
    }
    out
}

fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn scalar(t: Type) -> Option<&'static str> {
    Some(match t {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
        Type::Group | Type::Message | Type::Enum => return None,
    })
}

/// A field's type as written: a scalar keyword or the (possibly qualified) type name. A
/// descriptor that only names a type (not yet resolved) has no `type`.
fn type_name(f: &FieldDescriptorProto) -> String {
    match f
        .r#type
        .and_then(|t| Type::try_from(t).ok())
        .and_then(scalar)
    {
        Some(s) => s.to_string(),
        None => f.type_name().to_string(),
    }
}

/// The map entry message a field's type names, if it is one of `m`'s nested map entries.
fn map_entry<'a>(m: &'a DescriptorProto, f: &FieldDescriptorProto) -> Option<&'a DescriptorProto> {
    if f.label() != Label::Repeated {
        return None;
    }
    let simple = f.type_name().rsplit('.').next()?;
    m.nested_type.iter().find(|n| {
        n.name() == simple
            && n.options
                .as_ref()
                .and_then(|o| o.map_entry)
                .unwrap_or(false)
    })
}

fn field_options(f: &FieldDescriptorProto) -> String {
    let mut opts = Vec::new();
    if f.default_value.is_some() {
        let v = f.default_value();
        let rendered = match f.r#type.and_then(|t| Type::try_from(t).ok()) {
            Some(Type::String) | Some(Type::Bytes) => quote(v),
            _ => v.to_string(),
        };
        opts.push(format!("default = {rendered}"));
    }
    if let Some(o) = &f.options {
        if let Some(p) = o.packed {
            opts.push(format!("packed = {p}"));
        }
        if let Some(d) = o.deprecated {
            opts.push(format!("deprecated = {d}"));
        }
    }
    if opts.is_empty() {
        String::new()
    } else {
        format!(" [{}]", opts.join(", "))
    }
}

fn field(
    out: &mut String,
    m: &DescriptorProto,
    f: &FieldDescriptorProto,
    depth: usize,
    proto3: bool,
    in_oneof: bool,
) {
    indent(out, depth);
    if let Some(entry) = map_entry(m, f) {
        let key = entry.field.iter().find(|x| x.number() == 1);
        let value = entry.field.iter().find(|x| x.number() == 2);
        if let (Some(k), Some(v)) = (key, value) {
            let _ = writeln!(
                out,
                "map<{}, {}> {} = {}{};",
                type_name(k),
                type_name(v),
                f.name(),
                f.number(),
                field_options(f)
            );
            return;
        }
    }
    let label = match f.label() {
        _ if in_oneof => "",
        Label::Repeated => "repeated ",
        Label::Required => "required ",
        Label::Optional if !proto3 || f.proto3_optional() => "optional ",
        Label::Optional => "",
    };
    let _ = writeln!(
        out,
        "{label}{} {} = {}{};",
        type_name(f),
        f.name(),
        f.number(),
        field_options(f)
    );
}

fn message(out: &mut String, m: &DescriptorProto, depth: usize, proto3: bool) {
    indent(out, depth);
    let _ = writeln!(out, "message {} {{", m.name());
    if let Some(o) = &m.options {
        if let Some(d) = o.deprecated {
            indent(out, depth + 1);
            let _ = writeln!(out, "option deprecated = {d};");
        }
    }
    // A real oneof is printed where its first member is; proto3 `optional` fields have a
    // synthetic oneof of their own, printed as plain fields.
    let synthetic = |i: i32| {
        m.field
            .iter()
            .any(|f| f.oneof_index == Some(i) && f.proto3_optional())
    };
    let mut printed_oneofs = Vec::new();
    for f in &m.field {
        match f.oneof_index {
            Some(i) if !synthetic(i) => {
                if printed_oneofs.contains(&i) {
                    continue;
                }
                printed_oneofs.push(i);
                indent(out, depth + 1);
                let name = m.oneof_decl.get(i as usize).map(|o| o.name()).unwrap_or("");
                let _ = writeln!(out, "oneof {name} {{");
                for member in m.field.iter().filter(|x| x.oneof_index == Some(i)) {
                    field(out, m, member, depth + 2, proto3, true);
                }
                indent(out, depth + 1);
                out.push_str("}\n");
            }
            _ => field(out, m, f, depth + 1, proto3, false),
        }
    }
    if !m.reserved_range.is_empty() {
        indent(out, depth + 1);
        let ranges: Vec<String> = m
            .reserved_range
            .iter()
            // DescriptorProto's reserved ranges are end-exclusive.
            .map(|r| match (r.start(), r.end() - 1) {
                (a, b) if a == b => a.to_string(),
                (a, 536_870_911) => format!("{a} to max"),
                (a, b) => format!("{a} to {b}"),
            })
            .collect();
        let _ = writeln!(out, "reserved {};", ranges.join(", "));
    }
    if !m.reserved_name.is_empty() {
        indent(out, depth + 1);
        let names: Vec<String> = m.reserved_name.iter().map(|n| quote(n)).collect();
        let _ = writeln!(out, "reserved {};", names.join(", "));
    }
    for n in &m.nested_type {
        if n.options
            .as_ref()
            .and_then(|o| o.map_entry)
            .unwrap_or(false)
        {
            continue;
        }
        out.push('\n');
        message(out, n, depth + 1, proto3);
    }
    for e in &m.enum_type {
        out.push('\n');
        enumeration(out, e, depth + 1);
    }
    extensions(out, &m.extension, depth + 1, proto3, false);
    indent(out, depth);
    out.push_str("}\n");
}

fn enumeration(out: &mut String, e: &EnumDescriptorProto, depth: usize) {
    indent(out, depth);
    let _ = writeln!(out, "enum {} {{", e.name());
    if let Some(o) = &e.options {
        if let Some(a) = o.allow_alias {
            indent(out, depth + 1);
            let _ = writeln!(out, "option allow_alias = {a};");
        }
        if let Some(d) = o.deprecated {
            indent(out, depth + 1);
            let _ = writeln!(out, "option deprecated = {d};");
        }
    }
    for v in &e.value {
        indent(out, depth + 1);
        let deprecated = v
            .options
            .as_ref()
            .and_then(|o| o.deprecated)
            .map(|d| format!(" [deprecated = {d}]"))
            .unwrap_or_default();
        let _ = writeln!(out, "{} = {}{deprecated};", v.name(), v.number());
    }
    if !e.reserved_range.is_empty() {
        indent(out, depth + 1);
        // EnumDescriptorProto's reserved ranges are end-inclusive.
        let ranges: Vec<String> = e
            .reserved_range
            .iter()
            .map(|r| match (r.start(), r.end()) {
                (a, b) if a == b => a.to_string(),
                (a, b) => format!("{a} to {b}"),
            })
            .collect();
        let _ = writeln!(out, "reserved {};", ranges.join(", "));
    }
    if !e.reserved_name.is_empty() {
        indent(out, depth + 1);
        let names: Vec<String> = e.reserved_name.iter().map(|n| quote(n)).collect();
        let _ = writeln!(out, "reserved {};", names.join(", "));
    }
    indent(out, depth);
    out.push_str("}\n");
}

fn extensions(
    out: &mut String,
    exts: &[FieldDescriptorProto],
    depth: usize,
    proto3: bool,
    top: bool,
) {
    let mut extendees: Vec<&str> = exts.iter().map(|f| f.extendee()).collect();
    extendees.dedup();
    let empty = DescriptorProto::default();
    for extendee in extendees {
        if top {
            out.push('\n');
        }
        indent(out, depth);
        let _ = writeln!(out, "extend {extendee} {{");
        for f in exts.iter().filter(|f| f.extendee() == extendee) {
            field(out, &empty, f, depth + 1, proto3, false);
        }
        indent(out, depth);
        out.push_str("}\n");
    }
}

fn service(out: &mut String, s: &ServiceDescriptorProto) {
    let _ = writeln!(out, "service {} {{", s.name());
    for m in &s.method {
        let stream = |b: bool| if b { "stream " } else { "" };
        let _ = writeln!(
            out,
            "  rpc {}({}{}) returns ({}{});",
            m.name(),
            stream(m.client_streaming()),
            m.input_type(),
            stream(m.server_streaming()),
            m.output_type()
        );
    }
    out.push_str("}\n");
}
