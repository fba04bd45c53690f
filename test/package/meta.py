#!/usr/bin/env python3
"""Checks META.json against the PGXN Meta Spec 1.0.0 and against the tree.

The spec's rules (required keys, SemVer versions, terms, tags, license shortcuts, prereq
phases and version ranges, provides) are checked by validate(); then the versions are
compared with what the build really installs: awa_shard.control's default_version, the
Makefile's EXTVERSION and debian/changelog. The validator is also run on broken copies of
META.json, each of which it must reject. Prints "meta: N passed, M failed".

Usage: meta.py [tree]   (default: the directory above test/)
"""
import copy
import json
import os
import re
import sys

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
RANGE_PART = re.compile(r"^(?:(==|!=|<=|>=|<|>)\s*)?(.+)$")
TERM = re.compile(r"^[^/\\\s\x00-\x1f\x7f]{2,}$")
TAG = re.compile(r"^[^/\\\x00-\x1f\x7f]{2,255}$")
URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:\S+$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd",
    "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit",
    "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay",
    "sun", "zlib", "open_source", "restricted", "unrestricted", "unknown"}
TOP_KEYS = {"name", "version", "abstract", "maintainer", "license", "provides", "meta-spec",
            "description", "generated_by", "tags", "no_index", "prereqs", "release_status",
            "resources"}
REQUIRED = ["name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"]
PHASES = {"configure", "build", "test", "runtime", "develop"}
RELATIONS = {"requires", "recommends", "suggests", "conflicts"}


def custom(key):
    return re.match(r"^[xX]_.", key) is not None


def nonempty_str(v):
    return isinstance(v, str) and len(v) >= 1


def version_range(v):
    """A prereq version: 0, "0", a SemVer, or comma-separated SemVers with operators."""
    if v == 0 or v == "0":
        return True
    if not isinstance(v, str):
        return False
    for part in v.split(","):
        m = RANGE_PART.match(part.strip())
        if not m or not SEMVER.match(m.group(2).strip()):
            return False
    return True


def semver_key(v):
    m = SEMVER.match(v)
    return tuple(int(m.group(i)) for i in (1, 2, 3))


def range_allows(rng, version):
    """Whether a version range admits the given SemVer (pre-release tags ignored)."""
    if rng == 0 or rng == "0":
        return True
    ver = semver_key(version)
    for part in rng.split(","):
        op, val = RANGE_PART.match(part.strip()).groups()
        bound = semver_key(val.strip())
        op = op or ">="
        ok = {"==": ver == bound, "!=": ver != bound, "<": ver < bound, "<=": ver <= bound,
              ">": ver > bound, ">=": ver >= bound}[op]
        if not ok:
            return False
    return True


def path_list(v):
    items = v if isinstance(v, list) else [v]
    return (len(items) >= 1 and all(isinstance(p, str) and len(p) >= 2 and not p.startswith("/")
                                    and "\\" not in p for p in items)
            and (not isinstance(v, list) or len(set(v)) == len(v)))


def validate(meta):
    """Errors of a META.json document against PGXN Meta Spec 1.0.x (empty list: valid)."""
    errors = []
    if not isinstance(meta, dict):
        return ["the document is not a JSON object"]
    for key in REQUIRED:
        if key not in meta:
            errors.append("required key missing: %s" % key)
    for key in meta:
        if key not in TOP_KEYS and not custom(key):
            errors.append("unknown key: %s" % key)
    spec = meta.get("meta-spec")
    if spec is not None:
        if not isinstance(spec, dict) or not re.match(r"^1\.0\.\d+$", str(spec.get("version", ""))):
            errors.append("meta-spec.version must be 1.0.x")
        elif set(spec) - {"version", "url"} - {k for k in spec if custom(k)}:
            errors.append("meta-spec has unknown keys")
        elif "url" in spec and spec["url"] not in ("https://pgxn.org/meta/spec.txt",
                                                   "http://pgxn.org/meta/spec.txt"):
            errors.append("meta-spec.url is not the spec's address")
    if "name" in meta and not (isinstance(meta["name"], str) and TERM.match(meta["name"])):
        errors.append("name is not a term (2+ characters, no slash, backslash, space)")
    if "version" in meta and not (isinstance(meta["version"], str) and SEMVER.match(meta["version"])):
        errors.append("version is not a SemVer: %r" % (meta["version"],))
    for key in ("abstract", "description", "generated_by"):
        if key in meta and not nonempty_str(meta[key]):
            errors.append("%s must be a non-empty string" % key)
    if "maintainer" in meta:
        m = meta["maintainer"]
        if not (nonempty_str(m) or (isinstance(m, list) and m and all(nonempty_str(x) for x in m))):
            errors.append("maintainer must be a string or a non-empty list of strings")
    if "license" in meta:
        lic = meta["license"]
        ok = ((isinstance(lic, str) and lic in LICENSES)
              or (isinstance(lic, list) and lic and all(x in LICENSES for x in lic))
              or (isinstance(lic, dict) and lic and all(isinstance(u, str) and URI.match(u)
                                                         for u in lic.values())))
        if not ok:
            errors.append("license is not a known shortcut, list of shortcuts or name->URI map")
    if "provides" in meta:
        prov = meta["provides"]
        if not isinstance(prov, dict) or not prov:
            errors.append("provides must be a non-empty object")
        else:
            for ext, d in prov.items():
                if not TERM.match(ext):
                    errors.append("provides key %r is not a term" % ext)
                if not isinstance(d, dict):
                    errors.append("provides.%s must be an object" % ext)
                    continue
                for k in ("file", "version"):
                    if k not in d:
                        errors.append("provides.%s.%s is required" % (ext, k))
                for k in d:
                    if k not in ("file", "version", "abstract", "docfile") and not custom(k):
                        errors.append("provides.%s has unknown key %s" % (ext, k))
                if "version" in d and not (isinstance(d["version"], str) and SEMVER.match(d["version"])):
                    errors.append("provides.%s.version is not a SemVer: %r" % (ext, d["version"]))
                for k in ("file", "docfile"):
                    if k in d and (isinstance(d[k], list) or not path_list(d[k])):
                        errors.append("provides.%s.%s is not a relative path" % (ext, k))
                if "abstract" in d and not nonempty_str(d["abstract"]):
                    errors.append("provides.%s.abstract must be a non-empty string" % ext)
    if "prereqs" in meta:
        pre = meta["prereqs"]
        if not isinstance(pre, dict) or not pre:
            errors.append("prereqs must be a non-empty object")
        else:
            for phase, rels in pre.items():
                if phase not in PHASES and not custom(phase):
                    errors.append("unknown prereq phase %s" % phase)
                    continue
                if not isinstance(rels, dict) or not rels:
                    errors.append("prereqs.%s must be a non-empty object" % phase)
                    continue
                for rel, deps in rels.items():
                    if rel not in RELATIONS and not custom(rel):
                        errors.append("unknown prereq relationship %s.%s" % (phase, rel))
                        continue
                    if not isinstance(deps, dict):
                        errors.append("prereqs.%s.%s must be an object" % (phase, rel))
                        continue
                    for name, rng in deps.items():
                        if not TERM.match(name) or not version_range(rng):
                            errors.append("prereqs.%s.%s.%s: bad name or version range %r"
                                          % (phase, rel, name, rng))
    if "tags" in meta:
        tags = meta["tags"]
        if not (isinstance(tags, list) and tags and all(isinstance(t, str) and TAG.match(t) for t in tags)):
            errors.append("tags must be a non-empty list of 2..255 character strings without slashes")
    if "no_index" in meta:
        ni = meta["no_index"]
        if (not isinstance(ni, dict) or not ({"file", "directory"} & set(ni))
                or any(k not in ("file", "directory") and not custom(k) for k in ni)
                or not all(path_list(ni[k]) for k in ("file", "directory") if k in ni)):
            errors.append("no_index must hold file and/or directory path lists")
    if "release_status" in meta and meta["release_status"] not in ("stable", "testing", "unstable"):
        errors.append("release_status must be stable, testing or unstable")
    if "resources" in meta:
        res = meta["resources"]
        if not isinstance(res, dict) or not res:
            errors.append("resources must be a non-empty object")
        else:
            for k, v in res.items():
                if k == "homepage":
                    if not (isinstance(v, str) and URI.match(v)):
                        errors.append("resources.homepage must be a URI")
                elif k == "bugtracker":
                    if (not isinstance(v, dict) or not ({"web", "mailto"} & set(v))
                            or ("web" in v and not URI.match(str(v["web"])))
                            or ("mailto" in v and not EMAIL.match(str(v["mailto"])))):
                        errors.append("resources.bugtracker needs web (URI) and/or mailto (email)")
                elif k == "repository":
                    if (not isinstance(v, dict) or not ("web" in v or ("url" in v and "type" in v))
                            or any(x in v and not URI.match(str(v[x])) for x in ("url", "web"))):
                        errors.append("resources.repository needs web, or url and type")
                elif not custom(k):
                    errors.append("resources has unknown key %s" % k)
    return errors


def three_part(v):
    """An extension version such as 1.1 as the SemVer PGXN wants (1.1.0)."""
    parts = v.split(".")
    return ".".join(parts + ["0"] * (3 - len(parts))) if len(parts) < 3 else v


def main():
    tree = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    passed = failed = 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print("not ok - %s%s" % (name, (": " + detail) if detail else ""))

    def read(rel):
        with open(os.path.join(tree, rel), encoding="utf-8") as f:
            return f.read()

    try:
        meta = json.loads(read("META.json"))
    except (OSError, ValueError) as e:
        check("META.json is readable JSON", False, str(e))
        print("meta: %d passed, %d failed" % (passed, failed))
        return 1
    check("META.json is readable JSON", True)
    errors = validate(meta)
    check("META.json is valid PGXN Meta Spec 1.0", not errors, "; ".join(errors))

    control = read("awa_shard.control")
    m = re.search(r"^default_version\s*=\s*'([^']+)'", control, re.M)
    default_version = m.group(1) if m else None
    m = re.search(r"^EXTVERSION\s*=\s*(\S+)", read("Makefile"), re.M)
    extversion = m.group(1) if m else None
    check("control default_version equals the Makefile's EXTVERSION",
          default_version is not None and default_version == extversion,
          "%r vs %r" % (default_version, extversion))
    want = three_part(default_version or "?")
    check("META version is the control file's default_version", meta.get("version") == want,
          "%r, want %r" % (meta.get("version"), want))
    prov = meta.get("provides", {}).get("awa_shard", {})
    check("provides.awa_shard.version is the control file's default_version",
          prov.get("version") == want, "%r, want %r" % (prov.get("version"), want))
    check("the name is the extension's", meta.get("name") == "awa_shard")
    for key in ("file", "docfile"):
        if key in prov:
            check("provides.awa_shard.%s exists" % key, os.path.isfile(os.path.join(tree, prov[key])),
                  prov[key])
    check("an install or upgrade script reaches default_version",
          any(re.match(r"^awa_shard--(.*--)?%s\.sql$" % re.escape(default_version or "?"), f)
              for f in os.listdir(os.path.join(tree, "sql"))))
    check("license is postgresql and LICENSE is the PostgreSQL License",
          meta.get("license") == "postgresql" and "PostgreSQL License" in read("LICENSE"))
    pg = meta.get("prereqs", {}).get("runtime", {}).get("requires", {}).get("PostgreSQL")
    check("runtime requires PostgreSQL 15 (and no other major)",
          pg is not None and version_range(pg) and range_allows(pg, "15.0.0")
          and range_allows(pg, "15.99.0") and not range_allows(pg, "14.99.0")
          and not range_allows(pg, "16.0.0"), repr(pg))
    changelog = read("debian/changelog").splitlines()[0]
    m = re.match(r"^\S+ \((?:\d+:)?([^-~)]+)(?:~[^-)]*)?(?:-[^)]*)?\)", changelog)
    check("debian/changelog's upstream version is EXTVERSION", m is not None and m.group(1) == extversion,
          changelog)
    notes = read("CHANGELOG.md")
    versions = sorted({v for f in os.listdir(os.path.join(tree, "sql"))
                       for v in re.findall(r"^awa_shard--(?:.*--)?([0-9.]+)\.sql$", f)})
    check("CHANGELOG.md has a section for every version with a script (%s)" % ", ".join(versions),
          all(re.search(r"^## %s\b" % re.escape(v), notes, re.M) for v in versions))

    # The validator must reject what the spec rejects.
    broken = {
        "an extension version that is not a SemVer (1.1)": lambda d: d.update(version="1.1"),
        "no license": lambda d: d.pop("license"),
        "an unknown license shortcut": lambda d: d.update(license="postgres"),
        "a provides entry without version": lambda d: d["provides"]["awa_shard"].pop("version"),
        "a name with a space": lambda d: d.update(name="awa shard"),
        "meta-spec 2.0.0": lambda d: d["meta-spec"].update(version="2.0.0"),
        "a bad version range": lambda d: d["prereqs"]["runtime"]["requires"].update(PostgreSQL="15"),
        "an unknown prereq phase": lambda d: d["prereqs"].update(install={"requires": {"x1": 0}}),
        "an unknown top-level key": lambda d: d.update(homepage="https://example.org/"),
        "a tag with a slash": lambda d: d.update(tags=["a/b"]),
    }
    for what, mutate in broken.items():
        doc = copy.deepcopy(meta)
        try:
            mutate(doc)
        except (KeyError, AttributeError, TypeError) as e:
            check("the validator rejects %s" % what, False, "cannot build the case: %s" % e)
            continue
        check("the validator rejects %s" % what, bool(validate(doc)))

    print("meta: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
