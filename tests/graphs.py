"""Small IR graphs covering every layer kind, built with seeded random weights."""

from lmu_edge import ir, lti


def lmu(
    rng,
    name="lmu",
    n_in=2,
    d=1,
    q=8,
    theta=12.0,
    disc="zoh",
    hidden="dense",
    units=5,
    input_to_hidden=False,
    return_sequences=True,
    memory=None,
    bias=True,
    rnn_path=False,
):
    hid = None
    z = d * q + (n_in if input_to_hidden else 0)
    if hidden == "dense":
        hid = ir.HiddenDense(rng.standard_normal((z, units)) * 0.3, rng.standard_normal(units) * 0.1, "tanh")
    elif hidden == "simple_rnn":
        hid = ir.HiddenSimpleRNN(
            rng.standard_normal((z, units)) * 0.3,
            rng.standard_normal((units, units)) * 0.2,
            rng.standard_normal(units) * 0.1,
            "tanh",
        )
    henc = menc = None
    if rnn_path and memory is None:
        memory = ir.DenseSS(disc, *lti.legendre_discrete(q, theta, disc))
    if rnn_path:
        henc = rng.standard_normal((units, d)) * 0.2
        menc = rng.standard_normal((d * q, d)) * 0.05
    return ir.LMU(
        name,
        memory_d=d,
        order=q,
        theta=theta,
        discretizer=disc,
        input_encoders=rng.standard_normal((n_in, d)),
        encoder_bias=rng.standard_normal(d) * 0.1 if bias else None,
        hidden_encoders=henc,
        memory_encoders=menc,
        hidden=hid,
        input_to_hidden=input_to_hidden,
        return_sequences=return_sequences,
        memory=memory if memory is not None else ir.ImpulseResponse(),
    )


def chain(rng, *, seq_len=None, n_in=2, **kw):
    """input -> Dense(relu) -> LMU -> Dense (or the LMU options in kw)."""
    pre = ir.Dense("pre", rng.standard_normal((n_in, 3)), rng.standard_normal(3) * 0.1, "relu")
    mid = lmu(rng, n_in=3, **kw)
    n_mid = mid.out_features(3)
    post = ir.Dense("post", rng.standard_normal((n_mid, 4)) * 0.5, None, "linear")
    return ir.Graph("chain", input_features=n_in, seq_len=seq_len, layers=(pre, mid, post))


def heads(rng, q=6, theta=16.0):
    """input -> Dense -> LMU -> sigmoid -> running mean -> softmax(5): the layers around the memory (a
    standalone activation's lookup table, a running mean over time, a softmax with an odd output count)."""
    pre, mid, _ = chain(rng, q=q, theta=theta).layers
    n_mid = mid.out_features(3)
    layers = (
        pre,
        mid,
        ir.Activation("act", "sigmoid"),
        ir.TimePooling("pool"),
        ir.Dense("head", rng.standard_normal((n_mid, 5)) * 2.0, rng.standard_normal(5) * 0.1, "softmax"),
    )
    return ir.Graph("heads", input_features=2, seq_len=None, layers=layers)
