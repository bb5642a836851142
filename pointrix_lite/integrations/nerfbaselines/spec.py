"""nerfbaselines' method spec: loaded by nerfbaselines from the ``nerfbaselines.specs`` entry point."""

from nerfbaselines import register

register(
    {
        "id": "pointrix-lite",
        "method_class": "pointrix_lite.integrations.nerfbaselines.method:PointrixLite",
        # The package is installed where nerfbaselines runs (pip install 'pointrix_lite[nerfbaselines]'):
        # nothing to build in a conda or docker environment.
        "backends_order": ["python"],
        "metadata": {
            "name": "pointrix_lite",
            "description": (
                "3D Gaussian splatting that trains on the CPU (native rasterizer) or on CUDA (gsplat), "
                "with the shipped recipe configs/colmap_cpu.yaml; --set config=PATH picks another."
            ),
        },
        "implementation_status": {},
    }
)
