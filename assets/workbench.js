() => {
  /* The workbench app's own script (workbench.ui.JS, run once on load). Each figure is an image
     to a screen reader, named by its title (which says the request, method and cycle): read as a
     page, a plotly figure was a stream of SVG text fragments. Kept current as the panels redraw. */
  const name = () => {
    for (const plot of document.querySelectorAll(".js-plotly-plot")) {
      const title = plot.querySelector(".gtitle");
      const lines = title ? [...title.querySelectorAll(".line")].map(l => l.textContent.trim()) : [];
      const label = lines.length ? lines.filter(Boolean).join("; ")       // a title's lines, apart
                    : title ? title.textContent.trim() : "figure";
      if (plot.getAttribute("aria-label") !== label) {
        plot.setAttribute("role", "img");
        plot.setAttribute("aria-label", label);
      }
    }
  };
  new MutationObserver(name).observe(document.body, { subtree: true, childList: true });
  name();
}
