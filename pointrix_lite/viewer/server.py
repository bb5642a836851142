"""Start viser safely (host and port checked, the bound port printed) and serve one scene.

viser silently moves to the next free port and, for an address this machine does not have,
retries a thousand ports and never comes up; both are checked here first so the user gets one
line (``--port 8080: already in use``) instead.
"""

from __future__ import annotations

import contextlib
import errno
import io
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from ..errors import ConfigError
from .camera import InitialView, ViewState, camera_from_view, render_size
from .gate import RenderGate
from .scene import RENDER_MODES, DisplayOptions, SceneView
from .worker import RenderWorker

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def check_bind(host: str, port: int, where: str = "--host/--port") -> None:
    """Fail in one line if ``host:port`` cannot be served (unknown host, not ours, port taken).

    Raises:
        ConfigError: naming the option and the reason.
    """
    if not 0 <= port <= 65535:
        raise ConfigError(f"{where}: port must be in 0..65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"{where}: cannot resolve host {host!r} ({exc})") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"{where}: port {port} on {host} is already in use (pick another port)") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"{where}: {host} is not an address of this machine") from None
            if exc.errno == errno.EACCES:
                raise ConfigError(f"{where}: no permission to bind port {port} (ports below 1024 need root)") from None
            raise ConfigError(f"{where}: cannot bind {host}:{port} ({exc.strerror})") from None


def start_server(host: str, port: int, where: str = "--host/--port", out: TextIO | None = None) -> Any:
    """A running ``viser.ViserServer`` on exactly ``host:port`` (port 0: one the OS picks).

    Prints the URL, the SSH tunnel command for a remote machine, and a warning when the
    server listens on every interface.

    Raises:
        ConfigError: bad host, busy port (also when another process took it in the meantime).
    """
    import viser

    out = out or sys.stdout
    check_bind(host, port, where)
    with contextlib.redirect_stdout(io.StringIO()):  # viser's own banner; the lines below replace it
        server = viser.ViserServer(host=host, port=port, verbose=False)
    bound = server.get_port()
    if port != 0 and bound != port:  # lost a race for the port: viser moved on silently
        server.stop()
        raise ConfigError(f"{where}: port {port} on {host} is already in use (pick another port)")
    url_host = "localhost" if host in LOCAL_HOSTS or host in ("0.0.0.0", "::") else host
    print(f"viewer: http://{url_host}:{bound}  (listening on {host}:{bound})", file=out)
    print(
        f"viewer: on a remote machine, tunnel it with `ssh -N -L {bound}:localhost:{bound} USER@{socket.gethostname()}` "
        f"and open http://localhost:{bound}",
        file=out,
    )
    if host not in LOCAL_HOSTS:
        print(f"viewer: WARNING: listening on {host}: anyone who can reach this machine can view the scene", file=out)
    return server


class Viewer:
    """A viser server showing ``scene``: one :class:`RenderWorker` per browser tab, plus the GUI.

    Args:
        scene: what to render.
        host, port: where to listen (checked by :func:`start_server`).
        options: initial display options (the GUI changes them).
        initial_view: where new tabs start (None: viser's default camera).
        gate: shared with the training loop when training live (None: render whenever asked).
        on_pause: called with True/False by the GUI's pause button (live training only).
        settle_s: quiet time before a moving camera's preview is replaced by a full frame.
    """

    def __init__(
        self,
        scene: SceneView,
        host: str = "127.0.0.1",
        port: int = 8080,
        options: DisplayOptions | None = None,
        initial_view: InitialView | None = None,
        gate: RenderGate | None = None,
        on_pause: Callable[[bool], None] | None = None,
        settle_s: float = 0.2,
        where: str = "--host/--port",
        out: TextIO | None = None,
    ) -> None:
        self.scene = scene
        self.options = options or DisplayOptions()
        if self.options.sh_degree is None:
            self.options.sh_degree = scene.max_sh_degree
        self.initial_view = initial_view
        self.gate = gate
        self.settle_s = settle_s
        self.out = out or sys.stdout
        self.workers: dict[int, RenderWorker] = {}
        self._views: dict[int, ViewState] = {}
        self._lock = threading.Lock()
        self.server = start_server(host, port, where, self.out)
        self.port = self.server.get_port()
        self.server.scene.world_axes.visible = False
        if initial_view is not None:  # also where the browser's "Reset view" goes
            self.server.scene.set_up_direction(tuple(float(v) for v in initial_view.up))
            cam = self.server.initial_camera
            cam.fov = float(initial_view.fov)
            cam.position = tuple(float(v) for v in initial_view.position)
            cam.look_at = tuple(float(v) for v in initial_view.look_at)
            cam.up = tuple(float(v) for v in initial_view.up)
        self._build_gui(on_pause)
        self.server.on_client_connect(self._on_connect)
        self.server.on_client_disconnect(self._on_disconnect)

    # --- GUI ---------------------------------------------------------------------------------
    def _build_gui(self, on_pause: Callable[[bool], None] | None) -> None:
        gui = self.server.gui
        opts = self.options
        self.gui_mode = gui.add_dropdown("Render mode", RENDER_MODES, initial_value=opts.mode)
        self.gui_res = gui.add_slider("Max resolution", min=64, max=2048, step=16, initial_value=opts.max_res)
        top = max(self.scene.max_sh_degree, 0)
        self.gui_sh = gui.add_slider(
            "SH degree", min=0, max=max(top, 1), step=1, initial_value=min(opts.sh_degree or 0, top), disabled=top == 0
        )
        self.gui_frame = gui.add_text("Frame", initial_value="-", disabled=True)

        def changed(_: Any) -> None:
            opts.mode = self.gui_mode.value
            opts.max_res = int(self.gui_res.value)
            opts.sh_degree = min(int(self.gui_sh.value), top)
            self.refresh()

        for handle in (self.gui_mode, self.gui_res, self.gui_sh):
            handle.on_update(changed)
        self.gui_step = self.gui_gaussians = self.gui_loss = self.gui_pause = None
        if on_pause is not None:
            with gui.add_folder("Training"):
                self.gui_step = gui.add_text("Step", initial_value="0", disabled=True)
                self.gui_gaussians = gui.add_text("Gaussians", initial_value="-", disabled=True)
                self.gui_loss = gui.add_text("Loss", initial_value="-", disabled=True)
                self.gui_pause = gui.add_button("Pause training")

            @self.gui_pause.on_click
            def _(_: Any) -> None:
                paused = self.gui_pause.label.startswith("Pause")
                self.gui_pause.label = "Resume training" if paused else "Pause training"
                on_pause(paused)

    def show_training(self, step: int, num_gaussians: int | None, loss: float | None) -> None:
        """Update the training panel (cheap; call it at a few Hz, not every step)."""
        if self.gui_step is None:
            return
        self.gui_step.value = str(step)
        self.gui_gaussians.value = f"{num_gaussians:,}" if num_gaussians is not None else "-"
        self.gui_loss.value = f"{loss:.5f}" if loss is not None else "-"

    # --- clients -----------------------------------------------------------------------------
    def _on_connect(self, client: Any) -> None:
        timing = {"seconds": 0.0}

        def render(view: ViewState, full: bool) -> Any:
            start = time.perf_counter()
            image = self.render_view(view, full)
            timing["seconds"] = time.perf_counter() - start
            return image

        def deliver(image: Any, view: ViewState, full: bool) -> None:
            client.scene.set_background_image(image, format="jpeg", jpeg_quality=self.options.jpeg_quality)
            if full:
                self.gui_frame.value = f"{image.shape[1]}x{image.shape[0]}, {timing['seconds'] * 1000:.0f} ms"

        def on_error(exc: Exception) -> None:
            message = f"{type(exc).__name__}: {exc}"
            print(f"viewer: render failed for client {client.client_id}: {message}", file=sys.stderr)
            try:
                client.add_notification("Render failed", message, auto_close_seconds=10.0, color="red")
            except Exception:  # noqa: BLE001 - the tab may be gone already
                pass

        worker = RenderWorker(
            render, deliver, on_error, settle_s=self.settle_s, name=f"viewer-render-{client.client_id}"
        )
        with self._lock:
            self.workers[client.client_id] = worker

        def camera_moved(camera: Any) -> None:
            view = ViewState(
                tuple(float(v) for v in camera.wxyz),
                tuple(float(v) for v in camera.position),
                float(camera.fov),
                int(camera.image_width),
                int(camera.image_height),
            )
            if view.canvas_width <= 0 or view.canvas_height <= 0:
                return  # a hidden tab: nothing to draw into
            with self._lock:
                self._views[client.client_id] = view
            worker.submit(view)

        client.camera.on_update(camera_moved)
        camera_moved(client.camera)  # viser connects a client on its first camera message: draw that one

    def _on_disconnect(self, client: Any) -> None:
        with self._lock:
            worker = self.workers.pop(client.client_id, None)
            self._views.pop(client.client_id, None)
        if worker is not None:
            worker.stop(timeout=0)

    def render_view(self, view: ViewState, full: bool = True) -> Any:
        """[H, W, 3] uint8 frame for ``view`` (None for a zero-size canvas); waits for the gate."""
        opts = self.options
        size = render_size(
            view.canvas_width, view.canvas_height, opts.max_res if full else min(opts.preview_res, opts.max_res)
        )
        if size is None:
            return None
        camera = camera_from_view(view, *size)
        if self.gate is None:
            return self.scene.render(camera, opts.mode, opts.sh_degree)
        with self.gate.render():
            return self.scene.render(camera, opts.mode, opts.sh_degree)

    def refresh(self) -> None:
        """Re-render every tab's current camera at full resolution (the scene or the options changed)."""
        with self._lock:
            jobs = [(self.workers[c], v) for c, v in self._views.items() if c in self.workers]
        for worker, view in jobs:
            worker.submit(view, full=True)

    def close(self) -> None:
        """Stop every render thread and the server (idempotent)."""
        with self._lock:
            workers, self.workers = list(self.workers.values()), {}
        for worker in workers:
            worker.stop()
        if self.server is not None:
            self.server.stop()
            self.server = None
