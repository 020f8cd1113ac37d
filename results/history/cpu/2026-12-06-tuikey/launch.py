"""Launcher: workbench's CLI with timestamps (CLOCK_MONOTONIC) of key posts, action_pane and
_display written to $TK_LOG, one line each."""
import os, sys, time

def _patch():
    from textual.app import App
    from textual import events
    log = open(os.environ["TK_LOG"], "a", buffering=1)
    post = App.post_message
    def post_message(self, message):
        if isinstance(message, events.Key):
            log.write(f"{time.monotonic():.6f} keypost {message.key}\n")
        return post(self, message)
    App.post_message = post_message
    disp = App._display
    import cProfile
    prof = cProfile.Profile() if os.environ.get("TK_PROF") else None
    state = {"on": False, "n": 0}
    def _display(self, screen, renderable):
        t = time.monotonic()
        r = disp(self, screen, renderable)
        if renderable is not None:
            log.write(f"{t:.6f} display {time.monotonic() - t:.6f} {time.thread_time():.6f}\n")
            if prof is not None and state["on"]:
                prof.disable(); state["on"] = False; state["n"] += 1
                if state["n"] > 2:
                    prof.dump_stats(os.environ["TK_PROF"])
                else:
                    prof.clear() if hasattr(prof, "clear") else None
        return r
    App._display = _display
    on_event = App.on_event
    async def on_event_(self, event):
        if isinstance(event, events.Key):
            log.write(f"{time.monotonic():.6f} keyevent {event.key} {time.thread_time():.6f}\n")
        return await on_event(self, event)
    App.on_event = on_event_
    from workbench.screens.app import WorkbenchApp
    ap = WorkbenchApp.action_pane
    def action_pane(self, pane):
        log.write(f"{time.monotonic():.6f} action_pane {pane} {time.thread_time():.6f}\n")
        if prof is not None and not state["on"]:
            state["on"] = True; prof.enable()
        return ap(self, pane)
    WorkbenchApp.action_pane = action_pane

if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    _patch()
    from workbench.cli import main
    sys.exit(main())
