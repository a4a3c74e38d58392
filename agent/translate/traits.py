"""What an instantiation fixes at port time beyond its own template arguments, for folding.py:
the ``static constexpr`` members of a traits class the kernel is instantiated with
(``Ktraits::kIsEvenLen`` with Ktraits = ``Selective_Scan_fwd_kernel_traits<32, 4, 1, false,
...>``: the member's initializer folded with the class's template parameters bound), and type
comparisons once aliases are resolved (``std::is_same_v<weight_t, complex_t>``: float is no
``c10::complex<float>``). A type is compared as its resolved spelling; where two spellings may
still name one type (``long`` and ``int64_t``, two class templates' arguments) nothing is
decided, so a condition over them stays unknown and its code stays in the port."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.folding import Value, fold
from agent.translate.macros import split_template_args
from agent.translate.tree import _text, _walk, aliases_in

# builtin spellings -> one name each; spellings that may or may not be one type (long and
# long long, char and signed char) get names of their own, so only an exact match is "same"
_PRIMITIVE = {
    "bool": "bool", "char": "char", "signed char": "schar", "int8_t": "schar",
    "unsigned char": "uchar", "uint8_t": "uchar", "short": "short", "int16_t": "short",
    "unsigned short": "ushort", "uint16_t": "ushort", "int": "int", "signed": "int",
    "signed int": "int", "int32_t": "int", "unsigned": "uint", "unsigned int": "uint",
    "uint32_t": "uint", "long": "long", "long long": "longlong", "int64_t": "int64_t",
    "unsigned long": "ulong", "unsigned long long": "ulonglong", "uint64_t": "uint64_t",
    "float": "float", "double": "double", "void": "void", "half": "half", "__half": "half",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16"}
# the 64-bit integer spellings: which of them are one type depends on the platform
_WIDE = {"long", "longlong", "int64_t", "ulong", "ulonglong", "uint64_t"}
_SIZES = {"bool": 1, "char": 1, "schar": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4,
          "uint": 4, "long": 8, "longlong": 8, "int64_t": 8, "ulong": 8, "ulonglong": 8,
          "uint64_t": 8, "float": 4, "double": 8, "half": 2, "bf16": 2}
_VECTOR = re.compile(r"(?:u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4]")
_SAME = re.compile(r"(?:(?:std|metal)\s*::\s*)?is_same(?:_v\s*<(.*)>|\s*<(.*)>\s*::\s*value)",
                   re.S)
_CONDITIONAL = re.compile(
    r"(?:(?:std|metal)\s*::\s*)?conditional(?:_t\s*<(.*)>|\s*<(.*)>\s*::\s*type)", re.S)
_DROPPED = re.compile(r"\b(?:typename|const|volatile|struct|class|__restrict__)\b")


class Instantiation:
    """The values and types one instantiation fixes: ``bindings`` maps the kernel's template
    parameters to their arguments as the user spelled them; ``local`` is a function body whose
    ``using`` aliases are in scope (the kernel's)."""

    def __init__(self, root: Node, data: bytes, bindings: dict[str, str],
                 local: Node | None = None) -> None:
        self.root, self.data = root, data
        self.structs: dict[str, Node] = {}
        for n in _walk(root):
            name = n.child_by_field_name("name") if n.type in (
                "struct_specifier", "class_specifier") else None
            if name is not None and name.type == "type_identifier" and \
                    n.child_by_field_name("body") is not None:
                self.structs.setdefault(_text(name, data), n)
        scopes = {n.parent.start_byte: n.parent for n in _walk(root) if n.type in (
            "alias_declaration", "type_definition") and _at_file_scope(n)}
        self.file = {k: v for scope in scopes.values()
                     for k, v in aliases_in(scope, data, top_only=True).items()}
        self._members: dict[str, tuple[dict[str, str], dict[str, Value]] | None] = {}
        self.scope: dict[str, str] = {}
        self.scope = {k: self.resolve(v, {}) for k, v in bindings.items()}
        for name, spelled in (aliases_in(local, data) if local is not None else {}).items():
            self.scope[name] = self.resolve(spelled, self.scope)

    def lookup(self, node: Node) -> Value | None:
        """folding.fold's ``lookup`` in the kernel's scope."""
        return self._value(node, self.scope, {})

    def for_scope(self, bindings: dict[str, str]):
        """A lookup for a function template instantiated with ``bindings`` (its template
        parameters -> resolved types or values as text)."""
        return lambda node: self._value(node, dict(bindings), {})

    def resolve(self, spelled: str, scope: dict[str, str], depth: int = 0) -> str:
        """``spelled`` with every alias, template parameter and traits member type it names
        replaced by what it stands for; names kport does not know are kept as written."""
        t = " ".join(_DROPPED.sub(" ", spelled).split())
        if depth > 16 or not t:
            return t
        if t in _PRIMITIVE or _VECTOR.fullmatch(t):
            return t
        cond = _CONDITIONAL.fullmatch(t)
        if cond:
            parts = split_template_args(cond[1] or cond[2])
            value = self._fold_text(parts[0], scope) if len(parts) == 3 else None
            if value is not None:
                return self.resolve(parts[1 if value else 2], scope, depth + 1)
        owner, member = _split_scope(t)
        if owner:
            resolved = self.resolve(owner, scope, depth + 1)
            members = self._class(resolved)
            if members is not None and member in members[0]:
                return members[0][member]
            return f"{resolved}::{member}"
        head, args = _template_id(t)
        if args is not None:
            done = [self._argument(a, scope, depth) for a in args]
            return f"{self.resolve(head, scope, depth + 1)}<{', '.join(done)}>"
        if t in scope:
            return scope[t]
        if t in self.file:
            return self.resolve(self.file[t], {}, depth + 1)
        return t

    def same(self, a: str, b: str) -> bool | None:
        """Whether resolved types ``a`` and ``b`` are one type; None when kport cannot tell."""
        if a == b:
            return True if self._known(a) else None
        pa, pb = _PRIMITIVE.get(a), _PRIMITIVE.get(b)
        if pa and pb:
            return True if pa == pb else None if {pa, pb} <= _WIDE else False
        if (pa or _VECTOR.fullmatch(a)) and (pb or _VECTOR.fullmatch(b)):
            return False  # a scalar is no vector, float2 no float4
        if (pa or _VECTOR.fullmatch(a)) and self._class_type(b) or \
                (pb or _VECTOR.fullmatch(b)) and self._class_type(a):
            return False  # a builtin type is no class
        return None

    # -- values
    def _value(self, node: Node, scope: dict[str, str], constants: dict[str, Value]
               ) -> Value | None:
        t = node.type
        text = _text(node, self.data)
        if t in ("qualified_identifier", "template_function"):
            m = _SAME.fullmatch(text.strip())
            if m:
                parts = split_template_args(m[1] or m[2])
                if len(parts) == 2:
                    return self.same(*(self.resolve(p, scope) for p in parts))
                return None
            owner, member = _split_scope(" ".join(text.split()))
            if owner:
                members = self._class(self.resolve(owner, scope))
                return members[1].get(member) if members is not None else None
        if t == "identifier" and text in scope:
            return _literal(scope[text])
        if t == "call_expression" and (f := node.child_by_field_name("function")) is not None \
                and f.type == "primitive_type":  # int(kIsVariableB), bool(n)
            args = node.child_by_field_name("arguments")
            if args is not None and args.named_child_count == 1:
                v = fold(args.named_children[0], self.data, constants,
                         lambda n: self._value(n, scope, constants))
                kind = _text(f, self.data)
                return None if v is None else bool(v) if kind == "bool" else \
                    int(v) if kind in ("int", "unsigned", "long", "short", "char") else None
        if t == "sizeof_expression":
            inner = node.named_children[0] if node.named_children else None
            if inner is not None and inner.type in ("parenthesized_expression",
                                                    "type_descriptor"):
                spelled = _text(inner, self.data).strip()
                spelled = spelled[1:-1] if spelled.startswith("(") else spelled
                return _SIZES.get(_PRIMITIVE.get(self.resolve(spelled, scope), ""))
        return None

    def _fold_text(self, text: str, scope: dict[str, str]) -> Value | None:
        """The value of expression ``text`` (a template argument) in ``scope``."""
        if (v := _literal(text)) is not None:
            return v
        from kb.parse import parse  # lazy: only a conditional_t over a condition needs it

        data = f"constexpr bool kport_v = ({text});".encode()
        decl = next((n for n in _walk(parse(data, "cuda")) if n.type == "init_declarator"),
                    None)
        value = decl.child_by_field_name("value") if decl is not None else None
        if value is None:
            return None
        saved, self.data = self.data, data
        try:
            return fold(value, data, {}, lambda n: self._value(n, scope, {}))
        finally:
            self.data = saved

    def _argument(self, arg: str, scope: dict[str, str], depth: int) -> str:
        """A template argument resolved: a value's literal, else a type."""
        value = self._fold_text(arg, scope) if not _looks_like_type(arg) else None
        if value is not None:
            return str(value).lower() if isinstance(value, bool) else str(value)
        return self.resolve(arg, scope, depth + 1)

    # -- classes
    def _class(self, resolved: str) -> tuple[dict[str, str], dict[str, Value]] | None:
        """(member types, member constants) of a source class template instance, or None."""
        if resolved in self._members:
            return self._members[resolved]
        self._members[resolved] = None  # a class naming itself stops here
        head, args = _template_id(resolved)
        spec = self.structs.get(head if args is not None else resolved)
        if spec is None:
            return None
        outer = spec.parent
        scope: dict[str, str] = {}
        constants: dict[str, Value] = {}
        if outer is not None and outer.type == "template_declaration":
            for i, (name, default) in enumerate(_parameters(outer, self.data)):
                given = args[i] if args is not None and i < len(args) else default
                if given is None:
                    return None
                scope[name] = given if i < len(args or ()) else self.resolve(given, scope)
                if (v := _literal(scope[name])) is not None:
                    constants[name] = v
        for item in spec.child_by_field_name("body").named_children:
            if item.type == "alias_declaration" and item.child_by_field_name("name"):
                scope[_text(item.child_by_field_name("name"), self.data)] = self.resolve(
                    _text(item.child_by_field_name("type"), self.data), scope)
            elif item.type == "field_declaration" and re.match(
                    r"\s*static\s+(?:const\s+)?constexpr\b|\s*constexpr\s+static\b",
                    _text(item, self.data)):
                name = item.child_by_field_name("declarator")
                value = item.child_by_field_name("default_value")
                if name is None or value is None:
                    continue
                got = fold(value, self.data, constants,
                           lambda n, s=scope, c=constants: self._value(n, s, c))
                if got is not None:  # a value in scope too: a type may test it (scan_t)
                    constants[_text(name, self.data)] = got
                    scope[_text(name, self.data)] = str(got).lower() if isinstance(
                        got, bool) else str(got)
        self._members[resolved] = (scope, constants)
        return self._members[resolved]

    def _class_type(self, resolved: str) -> bool:
        """Whether ``resolved`` names a class: a source class (template) or a template-id /
        qualified name of a library's (``c10::complex<float>``)."""
        head, args = _template_id(resolved)
        return (head if args is not None else resolved) in self.structs or "<" in resolved \
            or "::" in resolved

    def _known(self, resolved: str) -> bool:
        """Whether ``resolved`` is a type, not a template parameter left unbound."""
        return resolved in _PRIMITIVE or bool(_VECTOR.fullmatch(resolved)) or \
            self._class_type(resolved)


def _at_file_scope(n: Node) -> bool:
    p = n.parent
    while p is not None and p.type in ("declaration_list", "namespace_definition",
                                       "linkage_specification"):
        p = p.parent
    return p is not None and p.type == "translation_unit"


def _parameters(outer: Node, data: bytes) -> list[tuple[str, str | None]]:
    """(name, default as spelled or None) of a template declaration's parameters."""
    out = []
    for p in outer.child_by_field_name("parameters").named_children:
        ids = [x for x in p.named_children if x.type in ("type_identifier", "identifier")]
        if not ids:
            decl = p.child_by_field_name("declarator")
            ids = [decl] if decl is not None else []
        default = p.child_by_field_name("default_type") or p.child_by_field_name(
            "default_value")
        out.append((_text(ids[-1], data) if ids else "",
                    _text(default, data) if default is not None else None))
    return out


def _split_scope(t: str) -> tuple[str, str]:
    """(owner, member) of ``A<...>::B`` split at the last ``::`` outside brackets; ("", t)
    when there is none or the owner is a namespace kport reads elsewhere (std, metal)."""
    depth, cut = 0, -1
    for i, c in enumerate(t):
        depth += c == "<"
        depth -= c == ">"
        if depth == 0 and t.startswith("::", i):
            cut = i
    if cut <= 0:
        return "", t
    owner, member = t[:cut].strip(), t[cut + 2:].strip()
    if owner in ("std", "metal") or not re.fullmatch(r"[A-Za-z_]\w*", member):
        return "", t
    return owner, member


def _template_id(t: str) -> tuple[str, list[str] | None]:
    """(head, arguments) of ``head<args>`` when ``t`` is one, else (t, None)."""
    if not t.endswith(">") or "<" not in t:
        return t, None
    head = t[:t.index("<")].strip()
    if not re.fullmatch(r"[A-Za-z_][\w:\s]*", head):
        return t, None
    return head, split_template_args(t[t.index("<") + 1:-1])


def _literal(text: str) -> Value | None:
    t = text.strip()
    if t in ("true", "false"):
        return t == "true"
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    return None


def _looks_like_type(arg: str) -> bool:
    t = " ".join(_DROPPED.sub(" ", arg).split())
    return t in _PRIMITIVE or bool(_VECTOR.fullmatch(t))
