//! ES modules contributed by plugins: the resolver and loader the runtime uses, and the
//! rewriting that lets the model's code `import` them while staying a script.
//!
//! Why rewrite: the round's result is the value of the code's last expression, which only
//! script evaluation produces; but a static `import` is a syntax error in a script. So the
//! import declarations at the top of the code become `await import()` (top-level await works
//! because the script is evaluated with `promise: true`), e.g.
//! `import x, { a as b } from "m";` → `const { default: x, a: b } = await import("m");`.
//! Each rewritten declaration keeps its number of lines, so every later line keeps its number
//! and error positions need no correction. Only the leading declarations are rewritten: past
//! the first statement a lexer would also have to understand strings, templates and regular
//! expressions to find real imports, and models put imports first anyway. A misplaced import
//! stays a syntax error, which `errors` explains.

use std::collections::HashMap;

use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Ctx, Error, Exception, Module};

use crate::naming::{is_identifier, is_identifier_part, is_identifier_start};
use crate::position::Position;

/// A rewritten import, to point module errors at the line that asked for the module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Import {
    pub module: String,
    pub line: u32,
    pub column: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rewrite {
    pub code: String,
    pub imports: Vec<Import>,
}

/// Rewrites the static import declarations at the top of `code` (see the module docs).
pub(crate) fn rewrite_static_imports(code: &str) -> Rewrite {
    let mut scanner = Scanner {
        source: code,
        position: 0,
    };
    let mut rewritten = String::with_capacity(code.len() + 32);
    let mut copied = 0;
    let mut imports = Vec::new();
    loop {
        scanner.skip_trivia();
        let start = scanner.position;
        let Some(declaration) = scanner.import_declaration() else {
            break;
        };
        let end = scanner.position;
        rewritten.push_str(&code[copied..start]);
        rewritten.push_str(&declaration.dynamic());
        rewritten.extend(std::iter::repeat_n(
            '\n',
            code[start..end].matches('\n').count(),
        ));
        copied = end;
        let Position { line, column } = Position::at_offset(code, start);
        imports.push(Import {
            module: declaration.module,
            line,
            column,
        });
    }
    rewritten.push_str(&code[copied..]);
    Rewrite {
        code: rewritten,
        imports,
    }
}

/// `import <default>, * as <namespace> from "<module>"` or with `{ <named> }`.
#[derive(Debug, Default)]
struct Declaration {
    module: String,
    default: Option<String>,
    namespace: Option<String>,
    /// (exported name, local name)
    named: Vec<(String, String)>,
}

impl Declaration {
    fn dynamic(&self) -> String {
        let call = format!("await import({})", quote(&self.module));
        let mut pattern: Vec<String> = Vec::new();
        if let Some(default) = &self.default {
            pattern.push(format!("default: {default}"));
        }
        for (exported, local) in &self.named {
            if exported == local {
                pattern.push(local.clone());
            } else if is_identifier(exported) {
                pattern.push(format!("{exported}: {local}"));
            } else {
                pattern.push(format!("{}: {local}", quote(exported)));
            }
        }
        let pattern = pattern.join(", ");
        match (&self.namespace, pattern.is_empty()) {
            (None, true) => format!("{call};"),
            (None, false) => format!("const {{ {pattern} }} = {call};"),
            (Some(namespace), true) => format!("const {namespace} = {call};"),
            (Some(namespace), false) => {
                format!("const {namespace} = {call}, {{ {pattern} }} = {namespace};")
            }
        }
    }
}

fn quote(text: &str) -> String {
    // A JSON string is a valid JavaScript string literal.
    serde_json::Value::String(text.to_owned()).to_string()
}

/// Just enough of a JavaScript lexer for import declarations. Every method either consumes
/// what it recognises or leaves the position where it was.
struct Scanner<'a> {
    source: &'a str,
    position: usize,
}

impl<'a> Scanner<'a> {
    fn rest(&self) -> &'a str {
        &self.source[self.position..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.position += c.len_utf8();
        }
        found
    }

    fn skip_trivia(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.position += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.position += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(comment) = trimmed.strip_prefix("/*") {
                // An unterminated comment is the engine's syntax error to report.
                let Some(end) = comment.find("*/") else {
                    return;
                };
                self.position += 2 + end + 2;
            } else {
                return;
            }
        }
    }

    fn identifier(&mut self) -> Option<String> {
        let rest = self.rest();
        if !rest.chars().next().is_some_and(is_identifier_start) {
            return None;
        }
        let end = rest
            .find(|c: char| !is_identifier_part(c))
            .unwrap_or(rest.len());
        let identifier = rest[..end].to_owned();
        self.position += end;
        Some(identifier)
    }

    fn keyword(&mut self, keyword: &str) -> bool {
        let start = self.position;
        if self.identifier().as_deref() == Some(keyword) {
            return true;
        }
        self.position = start;
        false
    }

    /// A single-line string literal; escapes are kept as the escaped character.
    fn string_literal(&mut self) -> Option<String> {
        let start = self.position;
        let quote = self.peek().filter(|c| matches!(c, '"' | '\''))?;
        self.position += 1;
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((offset, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.position += offset + 1;
                    return Some(value);
                }
                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                '\n' | '\r' => break,
                c => value.push(c),
            }
        }
        self.position = start;
        None
    }

    fn import_declaration(&mut self) -> Option<Declaration> {
        let start = self.position;
        let declaration = self.import_declaration_at_start();
        if declaration.is_none() {
            self.position = start;
        }
        declaration
    }

    fn import_declaration_at_start(&mut self) -> Option<Declaration> {
        if !self.keyword("import") {
            return None;
        }
        self.skip_trivia();
        let mut declaration = Declaration::default();
        // `import("m")` and `import.meta` are expressions, not declarations.
        if let Some(module) = self.string_literal() {
            declaration.module = module;
        } else {
            self.import_clause(&mut declaration)?;
            self.skip_trivia();
            if !self.keyword("from") {
                return None;
            }
            self.skip_trivia();
            declaration.module = self.string_literal()?;
        }
        let end = self.position;
        self.skip_trivia();
        // Import attributes (`with { type: "json" }`) are not supported: leave it to the engine.
        let next = self.position;
        if self.keyword("with") || self.keyword("assert") {
            return None;
        }
        self.position = next;
        if !self.eat(';') {
            self.position = end;
        }
        Some(declaration)
    }

    fn import_clause(&mut self, declaration: &mut Declaration) -> Option<()> {
        if let Some(default) = self.identifier() {
            declaration.default = Some(default);
            self.skip_trivia();
            if !self.eat(',') {
                return Some(());
            }
            self.skip_trivia();
        }
        if self.eat('*') {
            self.skip_trivia();
            if !self.keyword("as") {
                return None;
            }
            self.skip_trivia();
            declaration.namespace = Some(self.identifier()?);
            return Some(());
        }
        if !self.eat('{') {
            return None;
        }
        loop {
            self.skip_trivia();
            if self.eat('}') {
                return Some(());
            }
            let exported = match self.string_literal() {
                Some(name) => name,
                None => self.identifier()?,
            };
            self.skip_trivia();
            let local = if self.keyword("as") {
                self.skip_trivia();
                self.identifier()?
            } else if is_identifier(&exported) {
                exported.clone()
            } else {
                return None;
            };
            declaration.named.push((exported, local));
            self.skip_trivia();
            if !self.eat(',') {
                self.skip_trivia();
                return self.eat('}').then_some(());
            }
        }
    }
}

/// Resolves bare module names against the program's modules. An unknown name throws an Error
/// naming it, which surfaces as the run's error.
pub(crate) struct ModuleResolver {
    names: Vec<String>,
}

impl ModuleResolver {
    pub fn new(modules: &[(String, String)]) -> ModuleResolver {
        ModuleResolver {
            names: modules.iter().map(|(name, _)| name.clone()).collect(),
        }
    }
}

impl Resolver for ModuleResolver {
    fn resolve<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        let name = relative_to(base, name).unwrap_or_else(|| name.to_owned());
        let name = name.as_str();
        if self.names.iter().any(|known| known == name) {
            return Ok(name.to_owned());
        }
        let available = if self.names.is_empty() {
            "no modules are available".to_owned()
        } else {
            format!("available modules: {}", self.names.join(", "))
        };
        Err(Exception::throw_message(
            ctx,
            &format!("Unknown module \"{name}\" ({available})"),
        ))
    }
}

/// `name` (`./util.js`, `../lib/x.js`) read from the folder of the module `base`, as the
/// modules of a skill folder import each other (`skills/pdf/scripts/a.js` importing
/// `./util.js` is `skills/pdf/scripts/util.js`); `None` for a bare name, or one that climbs
/// out of every folder.
fn relative_to(base: &str, name: &str) -> Option<String> {
    if !(name.starts_with("./") || name.starts_with("../")) {
        return None;
    }
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for part in name.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// Compiles modules from source only, never from bytecode. Sources are cloned on load rather
/// than moved out (as rquickjs's `BuiltinLoader` does), so the loader never loses a source.
pub(crate) struct ModuleLoader {
    sources: HashMap<String, String>,
}

impl ModuleLoader {
    pub fn new(modules: Vec<(String, String)>) -> ModuleLoader {
        let mut sources = HashMap::with_capacity(modules.len());
        for (name, source) in modules {
            // The first module of a name wins, as the resolver's first match does.
            sources.entry(name).or_insert(source);
        }
        ModuleLoader { sources }
    }
}

impl Loader for ModuleLoader {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        let source = self
            .sources
            .get(name)
            .ok_or_else(|| Error::new_loading(name))?;
        if source.contains('\0') {
            return Err(Error::new_loading_message(
                name,
                "the module source contains a NUL byte",
            ));
        }
        Module::declare(ctx.clone(), name, source.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(code: &str) -> String {
        rewrite_static_imports(code).code
    }

    #[test]
    fn relative_imports_resolve_from_the_importing_modules_folder() {
        let base = "skills/pdf/scripts/a.js";
        assert_eq!(
            relative_to(base, "./util.js").as_deref(),
            Some("skills/pdf/scripts/util.js")
        );
        assert_eq!(
            relative_to(base, "../lib/x.js").as_deref(),
            Some("skills/pdf/lib/x.js")
        );
        assert_eq!(relative_to(base, "bare"), None);
        assert_eq!(relative_to("a.js", "../../x.js"), None);
    }

    #[test]
    fn named_default_and_namespace_imports_become_dynamic_imports() {
        assert_eq!(
            rewrite(r#"import { a, b as c } from "m";"#),
            r#"const { a, b: c } = await import("m");"#
        );
        assert_eq!(
            rewrite("import d from 'm'"),
            r#"const { default: d } = await import("m");"#
        );
        assert_eq!(
            rewrite(r#"import * as ns from "m";"#),
            r#"const ns = await import("m");"#
        );
        assert_eq!(
            rewrite(r#"import d, { a } from "m";"#),
            r#"const { default: d, a } = await import("m");"#
        );
        assert_eq!(
            rewrite(r#"import d, * as ns from "m";"#),
            r#"const ns = await import("m"), { default: d } = ns;"#
        );
        assert_eq!(rewrite(r#"import "m";"#), r#"await import("m");"#);
        assert_eq!(
            rewrite(r#"import { default as x, "odd-name" as y, } from "m";"#),
            r#"const { default: x, "odd-name": y } = await import("m");"#
        );
    }

    #[test]
    fn rewriting_keeps_every_line_number() {
        let code = "// helpers\nimport {\n  a,\n  b\n} from \"m\"\n/* more */ import c from \"n\";\nfoo(a, b, c);\n";
        let rewrite = rewrite_static_imports(code);
        assert_eq!(rewrite.code.lines().count(), code.lines().count());
        assert_eq!(rewrite.code.lines().nth(6), Some("foo(a, b, c);"));
        let lines: Vec<_> = rewrite
            .imports
            .iter()
            .map(|import| (import.module.as_str(), import.line, import.column))
            .collect();
        assert_eq!(lines, [("m", 2, 1), ("n", 6, 12)]);
    }

    #[test]
    fn only_leading_declarations_are_rewritten() {
        let code = "const x = 1;\nimport { a } from \"m\";";
        assert_eq!(rewrite(code), code);
        for code in [
            "import(\"m\").then(f)",
            "import.meta",
            "importantThing()",
            "import x from \"m\" with { type: \"json\" }",
        ] {
            assert_eq!(rewrite(code), code);
        }
    }
}
