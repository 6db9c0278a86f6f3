"""torch.save / torch.load of device tensors, modules and state dicts; map_location."""
import io

import pytest
import torch

import mytorch_ext  # noqa: F401


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_tensor_keeps_its_device():
    x = torch.randn(3, 4, device="mytorch:1")
    y = roundtrip(x)
    assert y.device == torch.device("mytorch:1") and torch.equal(y.cpu(), x.cpu())


@pytest.mark.parametrize("loc,expected", [("mytorch", "mytorch:0"), ("mytorch:1", "mytorch:1"),
                                          ("cpu", "cpu")])
def test_map_location(loc, expected):
    x = torch.randn(5, device="mytorch:0")
    views = {"x": x, "tail": x[2:], "t": torch.arange(6, device="mytorch:1").view(2, 3).t()}
    out = roundtrip(views, map_location=loc)
    for k in views:
        assert out[k].device == torch.device(expected)
        assert torch.equal(out[k].cpu(), views[k].cpu())
    # views saved together still share one storage after loading
    assert out["tail"].untyped_storage().data_ptr() == out["x"].untyped_storage().data_ptr()


def test_state_dict_and_module():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3)).to("mytorch")
    sd = roundtrip(m.state_dict(), map_location="mytorch:1")
    assert all(v.device == torch.device("mytorch:1") for v in sd.values())
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3)).to("mytorch:1")
    m2.load_state_dict(sd)
    assert torch.equal(m2[0].weight.cpu(), m[0].weight.cpu())
    whole = roundtrip(m, weights_only=False)
    assert whole[0].weight.device == torch.device("mytorch:0")
    assert torch.equal(whole[0].bias.cpu(), m[0].bias.cpu())


def test_cpu_checkpoint_straight_onto_the_device():
    m = torch.nn.Linear(3, 2)
    sd = roundtrip(m.state_dict(), map_location="mytorch")
    assert all(v.is_mytorch for v in sd.values())
    assert torch.equal(sd["weight"].cpu(), m.weight)
    x = roundtrip(torch.arange(5), map_location=torch.device("mytorch:1"))
    assert x.device == torch.device("mytorch:1")


def test_load_onto_missing_device_is_a_clear_error():
    with pytest.raises(RuntimeError, match="on MYTORCH device 4 but torch.mytorch.device_count.. is 2"):
        roundtrip(torch.ones(2), map_location="mytorch:4")
