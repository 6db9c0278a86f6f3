"""Printing and conversion: repr shows the device, item/tolist work, numpy refuses."""
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401


class TestPrinting(TestCase):
    def test_repr_shows_the_device(self):
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to("mytorch:1")
        self.assertExpectedInline(repr(x), """\
tensor([[0., 1., 2.],
        [3., 4., 5.]], device='mytorch:1')""")
        self.assertExpectedInline(repr(torch.tensor([1, 2], device="mytorch")), """tensor([1, 2], device='mytorch:0')""")
        p = torch.nn.Parameter(torch.ones(2, device="mytorch"))
        self.assertExpectedInline(repr(p), """\
Parameter containing:
tensor([1., 1.], device='mytorch:0', requires_grad=True)""")
        self.assertExpectedInline(repr(torch.device("mytorch:1")), """device(type='mytorch', index=1)""")

    def test_item_and_tolist(self):
        x = torch.tensor([[1.5, 2.0], [3.0, -4.25]], device="mytorch")
        self.assertEqual(x[1, 1].item(), -4.25)
        self.assertEqual(x.tolist(), [[1.5, 2.0], [3.0, -4.25]])
        self.assertEqual(torch.tensor(7, device="mytorch").item(), 7)
        self.assertEqual(torch.tensor([True, False], device="mytorch").tolist(), [True, False])
        self.assertEqual(float(x[0, 0]), 1.5)
        self.assertEqual(int(torch.tensor(3, device="mytorch")), 3)

    def test_numpy_asks_for_cpu_first(self):
        x = torch.ones(2, device="mytorch")
        with self.assertRaises(TypeError) as cm:
            x.numpy()
        self.assertExpectedInline(str(cm.exception), """can't convert mytorch:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.""")
        self.assertEqual(x.cpu().numpy().tolist(), [1.0, 1.0])
