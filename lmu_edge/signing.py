"""Ed25519 signatures over an artifact's seal: who built the artifact, checked by its receiver.

An artifact's seal (:data:`lmu_edge.outdir.RECORD`) lists every file lmu-edge wrote with its SHA-256. It is
unkeyed: anyone can edit a file and compute the list again. ``convert --sign KEY`` adds :data:`SIGNATURE`,
an Ed25519 signature of the seal's exact bytes by the builder's private key; ``run`` / ``verify``
``--trusted-key PUB`` (``open_artifact(d, trusted_key=PUB)``) then accept the artifact only when that
public key signed its seal, and the seal still matches every file. Keys are PEM files as OpenSSL writes them
(``openssl genpkey -algorithm ed25519 -out k.pem``; ``openssl pkey -in k.pem -pubout -out k.pub``) or as
``lmu-edge keygen`` does (:func:`generate`).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from .errors import ArtifactError

#: the signature file next to the seal (not listed in it: it signs the seal)
SIGNATURE = "lmu-edge-files.sig"
SIGNATURE_FORMAT = "lmu-edge-signature"
#: signed bytes are this prefix and the seal's bytes: a signature over a seal is no signature of anything else
_DOMAIN = b"lmu-edge artifact seal v1\n"
_MAX_KEY_BYTES = 16 << 10


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError as e:
        from .errors import MissingDependencyError

        raise MissingDependencyError(
            f"signing and --trusted-key need the Python package 'cryptography', which cannot be imported "
            f"({e}); install it with: pip install 'lmu-edge[sign]'"
        ) from None
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return serialization, ed25519


def _read_key_file(path, what: str) -> bytes:
    from .limits import check_regular_file

    p = check_regular_file(path, what)
    with open(p, "rb") as f:  # never the whole of a huge file
        data = f.read(_MAX_KEY_BYTES + 1)
    if len(data) > _MAX_KEY_BYTES:
        raise ArtifactError(f"{what} {p}: {len(data)}+ bytes, too large for an Ed25519 key file")
    return data


def load_private_key(path):
    """The Ed25519 private key in PEM file ``path`` (unencrypted PKCS#8), or :class:`ArtifactError`."""
    serialization, ed25519 = _crypto()
    data = _read_key_file(path, "--sign")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise ArtifactError(
            f"--sign {path}: not an unencrypted PEM private key ({' '.join(str(e).split())[:120]}); make one with "
            f"'lmu-edge keygen NAME' or 'openssl genpkey -algorithm ed25519 -out NAME.key'"
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ArtifactError(f"--sign {path}: a {type(key).__name__}, not an Ed25519 key; lmu-edge signs with Ed25519")
    return key


def load_public_key(path):
    """The Ed25519 public key in PEM file ``path`` (a private key's file gives its public half)."""
    serialization, ed25519 = _crypto()
    data = _read_key_file(path, "--trusted-key")
    key = None
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError):
            pass
    if key is None:
        raise ArtifactError(
            f"--trusted-key {path}: not a PEM public key; the builder's NAME.pub from 'lmu-edge keygen', or "
            f"'openssl pkey -in NAME.key -pubout'"
        )
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise ArtifactError(f"--trusted-key {path}: a {type(key).__name__}, not an Ed25519 key")
    return key


def _raw_public(key) -> bytes:
    serialization, _ = _crypto()
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public_key) -> str:
    """A short name of a public key: the first 16 hex digits of the SHA-256 of its raw bytes."""
    import hashlib

    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def sign(directory: Path, key_path, record: bytes) -> None:
    """Write :data:`SIGNATURE` into ``directory``: ``key_path``'s signature of ``record``, the bytes of its
    sealed record (:data:`lmu_edge.outdir.RECORD`, which imports this module: it is passed, not read here)."""
    key = load_private_key(key_path)
    sig = {
        "format": SIGNATURE_FORMAT,
        "version": 1,
        "algorithm": "ed25519",
        "public_key": base64.b64encode(_raw_public(key.public_key())).decode(),
        "signature": base64.b64encode(key.sign(_DOMAIN + record)).decode(),
    }
    (Path(directory) / SIGNATURE).write_text(json.dumps(sig, indent=1, sort_keys=True))


def check(directory: Path, record: bytes, trusted_key) -> None:
    """Refuse (:class:`ArtifactError`) unless :data:`SIGNATURE` in ``directory`` is ``trusted_key``'s
    signature of ``record`` (the seal's bytes, as read once by the caller)."""
    from . import limits

    public = load_public_key(trusted_key)
    from cryptography.exceptions import InvalidSignature

    path = Path(directory) / SIGNATURE
    where = f"{directory}: "
    if path.is_symlink() or not path.is_file():
        raise ArtifactError(
            f"{where}not signed (no {SIGNATURE}), and --trusted-key {trusted_key} was given; ask its builder for an "
            f"artifact converted with --sign, or run it without --trusted-key only if you trust where it came from"
        )
    try:
        with open(path, "rb") as f:  # at most 64 KiB: a huge (sparse) file is never read whole
            sig = limits.load_json(f.read(1 << 16), str(path))
        raw = base64.b64decode(sig["signature"], validate=True) if isinstance(sig, dict) else b""
        signer = base64.b64decode(sig.get("public_key", ""), validate=True) if isinstance(sig, dict) else b""
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise ArtifactError(
            f"{where}{SIGNATURE} is malformed; ask its builder to convert it again with --sign"
        ) from None
    if not isinstance(sig, dict) or sig.get("format") != SIGNATURE_FORMAT or sig.get("algorithm") != "ed25519":
        raise ArtifactError(f"{where}{SIGNATURE} is not an lmu-edge Ed25519 signature; convert it again with --sign")
    try:
        public.verify(raw, _DOMAIN + record)
    except InvalidSignature:
        if signer and signer != _raw_public(public):
            import hashlib

            who = f"signed by another key ({hashlib.sha256(signer).hexdigest()[:16]}, not {fingerprint(public)})"
        else:
            who = "its files or their seal changed since it was signed"
        raise ArtifactError(
            f"{where}the signature does not verify with --trusted-key {trusted_key}: {who}; do not run it, ask its "
            f"builder for the artifact again"
        ) from None


def generate(prefix) -> tuple:
    """Write a new Ed25519 key pair: ``PREFIX.key`` (private, mode 0600) and ``PREFIX.pub``; never replaces
    a file. Returns their paths."""
    serialization, ed25519 = _crypto()
    prefix = Path(prefix)
    priv_path, pub_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    for p in (priv_path, pub_path):
        if os.path.lexists(p):
            raise ArtifactError(f"{p} exists; choose another name (keygen never replaces a key)")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    try:
        fd = os.open(pub_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        priv_path.unlink()
        raise
    with os.fdopen(fd, "wb") as f:
        f.write(pub)
    return priv_path, pub_path
