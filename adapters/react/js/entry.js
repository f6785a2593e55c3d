// Entry of the React Email bundle that Postmill embeds (adapters/react/bundle/react-email.js).
//
// The bundle runs in a bare ECMAScript runtime (goja): there is no window, document, process, timer,
// fetch, TextEncoder or file system, and none is provided here. It only defines globalThis.PostmillReact:
//
//   React                 the react package (createElement, Fragment, hooks, ...)
//   jsxRuntime            react/jsx-runtime, for TSX compiled with the automatic JSX runtime
//   renderToStaticMarkup  react-dom/server's synchronous renderer
//   modules               module name -> function returning the module's exports; the only modules a
//                         template may require
//
// react-dom/server is taken from its legacy browser build directly: react-dom/server.browser also loads
// the streaming renderer, which needs TextEncoder at load time and is never used here.
//
// The @react-email packages are those of @react-email/components (package.json pins each to the version the
// components package pins). Markdown (marked) loads on first use, so a template that does not use it does not
// pay for it. Three are left out on purpose, and reading their exports throws an error that says so:
// CodeBlock (loading its Prism grammars takes tens of seconds of CPU in goja), Tailwind (its stylesheet
// compiler takes as long, suspends, and needs structuredClone) and @react-email/render (React Email's own
// asynchronous renderer: rendering is Postmill's job).
'use strict';

var React = require('react');
var jsxRuntime = require('react/jsx-runtime');
var server = require('./node_modules/react-dom/cjs/react-dom-server-legacy.browser.production.min.js');

var eager = {
  '@react-email/body': require('@react-email/body'),
  '@react-email/button': require('@react-email/button'),
  '@react-email/code-inline': require('@react-email/code-inline'),
  '@react-email/column': require('@react-email/column'),
  '@react-email/container': require('@react-email/container'),
  '@react-email/font': require('@react-email/font'),
  '@react-email/head': require('@react-email/head'),
  '@react-email/heading': require('@react-email/heading'),
  '@react-email/hr': require('@react-email/hr'),
  '@react-email/html': require('@react-email/html'),
  '@react-email/img': require('@react-email/img'),
  '@react-email/link': require('@react-email/link'),
  '@react-email/preview': require('@react-email/preview'),
  '@react-email/row': require('@react-email/row'),
  '@react-email/section': require('@react-email/section'),
  '@react-email/text': require('@react-email/text'),
};

// Export names of the lazily loaded packages, as published in the pinned versions.
var lazy = {
  '@react-email/markdown': {
    load: function () { return require('@react-email/markdown'); },
    names: ['Markdown'],
  },
};

// Exports of @react-email/components that this bundle does not carry, with the package they come from.
var unavailable = {
  CodeBlock: '@react-email/code-block',
  Tailwind: '@react-email/tailwind',
  pixelBasedPreset: '@react-email/tailwind',
  render: '@react-email/render',
  pretty: '@react-email/render',
  toPlainText: '@react-email/render',
};

var components = {};
Object.keys(eager).forEach(function (name) {
  var exports = eager[name];
  Object.keys(exports).forEach(function (key) {
    if (key !== '__esModule') {
      components[key] = exports[key];
    }
  });
});
Object.keys(lazy).forEach(function (name) {
  var entry = lazy[name];
  entry.names.forEach(function (key) {
    Object.defineProperty(components, key, {
      enumerable: true,
      get: function () { return entry.load()[key]; },
    });
  });
});
Object.keys(unavailable).forEach(function (key) {
  Object.defineProperty(components, key, {
    enumerable: false,
    get: function () {
      throw new Error(key + ' (' + unavailable[key] + ') is not available in Postmill\'s React Email renderer');
    },
  });
});

var modules = {
  'react': function () { return React; },
  'react/jsx-runtime': function () { return jsxRuntime; },
  '@react-email/components': function () { return components; },
};
Object.keys(eager).forEach(function (name) {
  modules[name] = function () { return eager[name]; };
});
Object.keys(lazy).forEach(function (name) {
  modules[name] = lazy[name].load;
});

globalThis.PostmillReact = {
  React: React,
  jsxRuntime: jsxRuntime,
  renderToStaticMarkup: server.renderToStaticMarkup,
  modules: modules,
};
