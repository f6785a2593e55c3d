// Glue between the React Email bundle and one template render. It runs in each fresh runtime right after the
// bundle, takes globalThis.PostmillReact away from the global scope and returns the two functions the Go side
// calls: require (the only module loader a template sees) and render (default export -> HTML).
//
// Template variables are not known when a version is created: they are interpolated at send time
// (SPEC §4.4). So the component is rendered with props whose every property is a placeholder: props.name is
// the text "{{ name }}" and props.user.firstName is "{{ user.firstName }}". A placeholder is a Proxy that
// turns into its text wherever a string is expected (template literals, concatenation, String()), and the
// React a template requires replaces placeholders by their text in element props and children, where React
// itself would reject an object.
(function () {
  'use strict';

  var R = globalThis.PostmillReact;
  delete globalThis.PostmillReact;
  var React = R.React;

  var placeholders = new WeakSet();
  var texts = new WeakMap();

  // Method names that a string or an array would have: calling one on a placeholder cannot produce what
  // the template means, because the value only exists at send time.
  var methods = {};
  [String.prototype, Array.prototype].forEach(function (proto) {
    Object.getOwnPropertyNames(proto).forEach(function (name) {
      if (name !== 'constructor' && name !== 'length' && typeof proto[name] === 'function') {
        methods[name] = true;
      }
    });
  });

  function placeholder(path) {
    var text = '{{ ' + path + ' }}';
    var toText = function () { return text; };
    var proxy = new Proxy({}, {
      get: function (target, key) {
        if (key === Symbol.toPrimitive || key === 'toString' || key === 'valueOf' || key === 'toJSON') {
          return toText;
        }
        if (typeof key === 'symbol' || key === '$$typeof' || key === 'then') {
          return undefined;
        }
        if (Object.prototype.hasOwnProperty.call(methods, key)) {
          return function () {
            throw new TypeError('props.' + path + '.' + key + '(): template variables are placeholders (' +
              text + ') filled in at send time; they cannot be transformed or iterated while rendering');
          };
        }
        return placeholder(path + '.' + key);
      },
      set: function () { return false; },
      has: function (target, key) { return typeof key === 'string'; },
      ownKeys: function () { return []; },
    });
    placeholders.add(proxy);
    texts.set(proxy, text);
    return proxy;
  }

  // rootProps is what the default export receives: reading any property gives its placeholder, except
  // children (the template is the root: it has none) and the names every object has.
  function rootProps() {
    return new Proxy({}, {
      get: function (target, key) {
        if (typeof key === 'symbol' || key === 'children' || key === '$$typeof' || key === 'then') {
          return undefined;
        }
        if (key in Object.prototype) {
          return Object.prototype[key];
        }
        return placeholder(key);
      },
      set: function () { return false; },
      has: function (target, key) { return typeof key === 'string' && key !== 'children'; },
      ownKeys: function () { return []; },
    });
  }

  function clean(value, depth) {
    if (value === null || typeof value !== 'object') {
      return value;
    }
    if (placeholders.has(value)) {
      return texts.get(value);
    }
    if (depth > 32 || !Array.isArray(value)) {
      return value;
    }
    var out = null;
    for (var i = 0; i < value.length; i++) {
      var c = clean(value[i], depth + 1);
      if (c !== value[i]) {
        out = out || value.slice();
        out[i] = c;
      }
    }
    return out || value;
  }

  function cleanProps(props, depth) {
    if (props === null || typeof props !== 'object' || placeholders.has(props) || Array.isArray(props)) {
      return props;
    }
    var out = null;
    Object.keys(props).forEach(function (key) {
      var v = props[key];
      var c = key === 'style' && depth === 0 ? cleanProps(v, 1) : clean(v, 0);
      if (c !== v) {
        out = out || Object.assign({}, props);
        out[key] = c;
      }
    });
    return out || props;
  }

  function cleanArgs(args, propsIndex) {
    var out = Array.prototype.slice.call(args);
    for (var i = propsIndex; i < out.length; i++) {
      out[i] = i === propsIndex ? cleanProps(out[i], 0) : clean(out[i], 0);
    }
    return out;
  }

  var templateReact = Object.assign({}, React, {
    createElement: function () { return React.createElement.apply(null, cleanArgs(arguments, 1)); },
    cloneElement: function () { return React.cloneElement.apply(null, cleanArgs(arguments, 1)); },
  });
  templateReact.default = templateReact;

  var jsx = R.jsxRuntime;
  var templateJSX = {
    Fragment: jsx.Fragment,
    jsx: function (type, props, key) { return jsx.jsx(type, cleanProps(props, 0), key); },
    jsxs: function (type, props, key) { return jsx.jsxs(type, cleanProps(props, 0), key); },
  };

  var modules = Object.assign({}, R.modules, {
    'react': function () { return templateReact; },
    'react/jsx-runtime': function () { return templateJSX; },
  });

  function require(name) {
    name = String(name);
    if (!Object.prototype.hasOwnProperty.call(modules, name)) {
      throw new Error('module "' + name + '" is not available');
    }
    return modules[name]();
  }

  function isComponent(value) {
    return typeof value === 'function' ||
      (value !== null && typeof value === 'object' && typeof value.$$typeof === 'symbol');
  }

  function render(exports) {
    var component = exports;
    if (exports !== null && typeof exports === 'object' && 'default' in exports) {
      component = exports['default'];
    }
    if (!isComponent(component)) {
      throw new TypeError('the default export must be a React component, got ' +
        (component === null ? 'null' : typeof component));
    }
    var element = React.createElement(component);
    element.props = rootProps();
    return R.renderToStaticMarkup(element);
  }

  // limit caps the built-ins that allocate or loop over a whole length in one native call, which the
  // watchdog cannot interrupt and a sparse array ([].length = 4e9) or an array-like ({length: 4e9}) makes
  // huge at no cost: strings may reach maxChars characters, arrays maxElements elements. Bundle code goes
  // through the same checks; its arrays and strings are far below them.
  function limit(maxChars, maxElements) {
    var apply = Reflect.apply;
    var isArray = Array.isArray;

    function fail(name, what, n, max) {
      throw new RangeError(name + ': ' + n + ' ' + what + ' are more than the ' + max + ' a render may use');
    }
    function lengthOf(o) {
      if (o === null || o === undefined) {
        return 0;
      }
      var n = Number(o.length);
      return n > 0 ? n : 0;
    }
    function wrap(obj, objName, names, check) {
      names.forEach(function (name) {
        var fn = obj[name];
        if (typeof fn !== 'function') {
          return;
        }
        Object.defineProperty(obj, name, {
          value: function () {
            check(objName + '.' + name, this, arguments);
            return apply(fn, this, arguments);
          },
          writable: true,
          configurable: true,
        });
      });
    }
    function chars(name, n) {
      if (n > maxChars) {
        fail(name, 'characters', n, maxChars);
      }
    }
    function elements(name, n) {
      if (n > maxElements) {
        fail(name, 'elements', n, maxElements);
      }
    }

    wrap(String.prototype, 'String.prototype', ['repeat'], function (name, self, args) {
      chars(name, String(self).length * (Number(args[0]) || 0));
    });
    wrap(String.prototype, 'String.prototype', ['padStart', 'padEnd'], function (name, self, args) {
      chars(name, Number(args[0]) || 0);
    });
    wrap(String.prototype, 'String.prototype', ['split'], function (name, self, args) {
      var sep = args[0];
      if (sep === '' || sep instanceof RegExp) {
        elements(name, String(self).length);
      }
    });
    wrap(Array.prototype, 'Array.prototype', ['join'], function (name, self, args) {
      var n = lengthOf(self);
      elements(name, n);
      chars(name, Math.max(n - 1, 0) * (args[0] === undefined ? 1 : String(args[0]).length));
    });
    wrap(Array.prototype, 'Array.prototype', ['fill', 'toString', 'toLocaleString', 'map', 'filter', 'slice',
      'concat', 'flat', 'flatMap', 'sort', 'splice', 'reverse', 'copyWithin', 'forEach', 'every', 'some',
      'reduce', 'reduceRight', 'indexOf', 'lastIndexOf', 'includes', 'find', 'findIndex', 'findLast',
      'findLastIndex', 'toSorted', 'toReversed', 'toSpliced', 'with'], function (name, self) {
      elements(name, lengthOf(self));
    });
    wrap(Array, 'Array', ['from'], function (name, self, args) {
      elements(name, lengthOf(args[0]));
    });
    wrap(Object, 'Object', ['keys', 'values', 'entries', 'getOwnPropertyNames', 'getOwnPropertyDescriptors'],
      function (name, self, args) {
        elements(name, isArray(args[0]) ? args[0].length : 0);
      });
    wrap(Function.prototype, 'Function.prototype', ['apply'], function (name, self, args) {
      elements(name, lengthOf(args[1]));
    });
    wrap(Reflect, 'Reflect', ['apply'], function (name, self, args) {
      elements(name, lengthOf(args[2]));
    });
    wrap(Reflect, 'Reflect', ['construct'], function (name, self, args) {
      elements(name, lengthOf(args[1]));
    });
  }

  return { require: require, render: render, limit: limit };
})();
